// GptDataset: the split's document ids and the dataset's sequence lengths go to
// build_gpt_sample_index once; get() assembles a sample from its pieces straight into the tensor.
// Megatron's GPT dataset treats each sequence of the .idx as a document (its preprocessing writes
// one sequence per document without --split-sentences), and so does this one.
#include "workloads/llm_training/data/gpt_dataset.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include <utility>

#include "core/error.hpp"

namespace scaffold::llm {

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, GptDatasetOptions options)
    : data_(std::move(data)), options_(std::move(options)) {
  SCAFFOLD_CHECK(data_ != nullptr, "GptDataset needs a dataset");
  const std::string idx = data_->index_path().string();
  const auto n = static_cast<int64_t>(data_->num_sequences());
  if (options_.first_document < 0 || options_.end_document > n ||
      options_.first_document >= options_.end_document)
    throw core::FileError(
        idx, fmt::format("the {} split is documents [{}, {}), which is empty or outside the {} "
                         "documents of the dataset",
                         options_.name, options_.first_document, options_.end_document, n));
  sizes_ = data_->sequence_lengths();
  std::vector<int32_t> documents;
  documents.reserve(static_cast<std::size_t>(options_.end_document - options_.first_document));
  for (int64_t d = options_.first_document; d < options_.end_document; ++d)
    documents.push_back(static_cast<int32_t>(d));
  int64_t tokens = 0;
  for (int32_t d : documents) tokens += sizes_[static_cast<std::size_t>(d)];
  const int64_t seq = options_.index.seq_length;
  if (seq >= 1 && tokens < seq + 1)
    throw core::FileError(
        idx, fmt::format("the {} split (documents [{}, {})) holds {} tokens in all, fewer than "
                         "the seq_length + 1 = {} of one sample: the sequence length is longer "
                         "than the split's documents together; use a shorter seq_length or more "
                         "data",
                         options_.name, options_.first_document, options_.end_document, tokens,
                         seq + 1));
  try {
    index_ = build_gpt_sample_index(documents, sizes_, options_.index);
  } catch (const core::Error& e) {
    throw core::FileError(idx, fmt::format("{} split: {}", options_.name, e.what()));
  }
}

std::vector<int64_t> GptDataset::tokens(std::size_t index) const {
  if (index >= size())
    throw core::Error(
        fmt::format("{} sample {} is outside the {} samples", options_.name, index, size()));
  std::vector<int64_t> out(static_cast<std::size_t>(options_.index.seq_length + 1));
  std::size_t at = 0;
  for (const SamplePiece& p : sample_pieces(index_, sizes_, static_cast<int64_t>(index))) {
    SCAFFOLD_CHECK(at + static_cast<std::size_t>(p.count) <= out.size(),
                   "sample pieces longer than a sample");
    data_->read(static_cast<std::size_t>(p.document), p.offset, p.count, out.data() + at);
    at += static_cast<std::size_t>(p.count);
  }
  SCAFFOLD_CHECK(at == out.size(), "sample pieces shorter than a sample");
  if (options_.vocab_size > 0)
    for (std::size_t k = 0; k < out.size(); ++k)
      if (out[k] < 0 || out[k] >= options_.vocab_size)
        throw core::FileError(
            data_->data_path().string(),
            fmt::format("token {} in {} sample {} is outside the model's vocabulary [0, {}) (was "
                        "the data tokenized with another vocabulary?)",
                        out[k], options_.name, index, options_.vocab_size));
  return out;
}

data::Example GptDataset::get(std::size_t index, uint64_t /*draw*/) const {
  const std::vector<int64_t> t = tokens(index);
  at::Tensor out = at::empty({static_cast<int64_t>(t.size())}, at::kLong);  // (seq_length + 1)
  std::copy(t.begin(), t.end(), out.data_ptr<int64_t>());
  return {{std::move(out)}, fmt::format("{}/{}", options_.name, index)};
}

}  // namespace scaffold::llm
