// make_gpt_sources: one IndexedDataset shared by both splits' GptDatasets (one mapping of the
// files); synthetic train and validation sources are disjoint ranges of one synthetic sequence.
// An empty source stands in for validation when no validation samples are asked for.
#include "workloads/llm_training/data/gpt_sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "workloads/llm_training/data/gpt_dataset.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"
#include "workloads/llm_training/data/megatron_index.hpp"

namespace scaffold::llm {
namespace {

class EmptySource : public data::ExampleSource {
 public:
  std::size_t size() const override { return 0; }
  data::Example get(std::size_t index, uint64_t /*draw*/) const override {
    throw core::Error(fmt::format("example {} of an empty source", index));
  }
};

const char* pattern_name(SyntheticTokenPattern p) {
  return p == SyntheticTokenPattern::kUniform ? "uniform" : "repeated corpus";
}

GptSources synthetic_sources(const GptDataOptions& o) {
  GptSources s;
  SyntheticTokensOptions so;
  so.seq_length = o.seq_length;
  so.vocab_size = o.vocab_size;
  so.seed = o.seed;
  so.pattern = o.synthetic_pattern;
  so.corpus_length = o.synthetic_corpus_length;
  so.count = o.train_samples;
  so.offset = 0;
  s.train = std::make_unique<SyntheticTokens>(so);
  so.count = o.valid_samples;
  so.offset = o.train_samples;  // disjoint from the training samples
  s.valid = std::make_unique<SyntheticTokens>(so);
  s.name = "synthetic";
  s.description =
      fmt::format("synthetic tokens ({}{}, vocabulary {})", pattern_name(o.synthetic_pattern),
                  o.synthetic_pattern == SyntheticTokenPattern::kRepeatedCorpus
                      ? fmt::format(" of {} tokens", o.synthetic_corpus_length)
                      : std::string(),
                  o.vocab_size);
  return s;
}

}  // namespace

GptSources make_gpt_sources(const GptDataOptions& o) {
  if (o.train_samples < 1)
    throw core::Error(fmt::format("train_samples {} must be >= 1", o.train_samples));
  if (o.valid_samples < 0)
    throw core::Error(fmt::format("valid_samples {} must be >= 0", o.valid_samples));
  if (o.seq_length < 1) throw core::Error(fmt::format("seq_length {} must be >= 1", o.seq_length));
  if (o.max_index_samples < 1)
    throw core::Error(fmt::format("max_index_samples {} must be >= 1", o.max_index_samples));
  if (o.data_path.empty()) return synthetic_sources(o);
  if (o.seed > std::numeric_limits<uint32_t>::max())
    throw core::Error(fmt::format(
        "seed {} must be below 2^32 (numpy's RandomState, which Megatron shuffles with)", o.seed));

  LOG_INFO(" > building dataset index ...");
  core::Stopwatch clock;
  auto data = std::make_shared<const IndexedDataset>(o.data_path);
  LOG_INFO(" > finished creating indexed dataset in {:.6f} seconds", clock.elapsed_s());
  const auto documents = static_cast<int64_t>(data->num_sequences());
  LOG_INFO("    number of documents: {}", documents);
  GptSources s;
  s.synthetic = false;
  s.documents = documents;
  try {
    s.split_bounds = split_document_ranges(o.split, documents);
  } catch (const core::Error& e) {
    throw core::Error(fmt::format("split: {}", e.what()));
  }
  const auto& b = s.split_bounds;
  LOG_INFO(" > dataset split:");
  const char* names[] = {"train", "validation", "test"};
  for (int i = 0; i < 3; ++i) {
    LOG_INFO("    {}:", names[i]);
    LOG_INFO("     document indices in [{}, {}) total of {} documents", b[i], b[i + 1],
             b[i + 1] - b[i]);
  }

  const auto make_split = [&](int which, int64_t asked,
                              int64_t* epochs) -> std::unique_ptr<data::ExampleSource> {
    if (asked == 0) return std::make_unique<EmptySource>();
    const int64_t samples = std::min(asked, o.max_index_samples);
    if (samples < asked)
      LOG_WARN(
          "{} samples of the {} split asked for; indexing {} (max_index_samples), which the "
          "run repeats: Megatron indexes all {} (about {:.1f} GB per rank), so from the first "
          "sample on the order differs from Megatron's",
          asked, names[which], samples, asked, 14.0 * static_cast<double>(asked) / 1e9);
    if (b[which + 1] <= b[which])
      throw core::FileError(
          data->index_path().string(),
          fmt::format(
              "split \"{}\" gives the {} set none of the {} documents, but {} {} samples are "
              "needed: give it a larger weight",
              o.split, names[which], documents, samples, names[which]));
    GptDatasetOptions go;
    go.name = which == 0 ? "train" : "valid";
    go.first_document = b[which];
    go.end_document = b[which + 1];
    go.index.num_samples = samples;
    go.index.seq_length = o.seq_length;
    go.index.seed = static_cast<uint32_t>(o.seed);
    go.vocab_size = o.vocab_size;
    auto ds = std::make_unique<GptDataset>(data, go);
    LOG_INFO(" > {} index: {} samples wanted, {} samples in {} epoch(s) of {} tokens{}", go.name,
             samples, ds->available_samples(), ds->sample_index().num_epochs,
             ds->sample_index().tokens_per_epoch,
             ds->sample_index().separate_last_epoch ? ", last epoch shuffled separately" : "");
    LOG_INFO("    total number of samples: {}", ds->available_samples());
    LOG_INFO("    total number of epochs: {}", ds->sample_index().num_epochs);
    *epochs = ds->sample_index().num_epochs;
    return ds;
  };
  s.train = make_split(0, o.train_samples, &s.train_epochs);
  s.valid = make_split(1, o.valid_samples, &s.valid_epochs);
  s.name = std::filesystem::path(o.data_path).filename().string();
  s.description = fmt::format(
      "Megatron indexed dataset {} ({} documents, {} tokens, split {} -> train [{}, {}), "
      "validation [{}, {}))",
      o.data_path, documents, token_dtype_name(data->dtype()), o.split, b[0], b[1], b[1], b[2]);
  return s;
}

}  // namespace scaffold::llm
