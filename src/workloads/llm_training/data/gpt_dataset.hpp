// One split of a Megatron indexed dataset as an ExampleSource of GPT samples: sample i is the
// seq_length + 1 tokens Megatron's GPTDataset returns for index i (megatron_index.hpp: documents
// of the split shuffled per seed, concatenated, cut into samples that overlap by one token, the
// samples shuffled). Reads tokens from the memory-mapped .bin on every get(); nothing is cached.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"
#include "workloads/llm_training/data/megatron_index.hpp"

namespace scaffold::llm {

struct GptDatasetOptions {
  std::string name = "train";  // the split's name, for logs and example ids
  int64_t first_document = 0;  // the split's documents [first_document, end_document)
  int64_t end_document = 0;
  GptIndexOptions index;   // num_samples = size() of the source
  int64_t vocab_size = 0;  // > 0: every token must be below it (the model's embedding)
};

class GptDataset : public data::ExampleSource {
 public:
  // Builds the sample index. Throws core::FileError naming the .idx when the document range is
  // empty or outside the dataset, or its documents hold fewer than seq_length + 1 tokens.
  GptDataset(std::shared_ptr<const IndexedDataset> data, GptDatasetOptions options);

  std::size_t size() const override { return static_cast<std::size_t>(options_.index.num_samples); }
  // Fields: tokens (seq_length + 1) int64. id: "<name>/<index>". `draw` is ignored. Throws
  // core::FileError naming the .bin when a token is >= vocab_size.
  data::Example get(std::size_t index, uint64_t draw) const override;
  // The tokens of sample `index` (what get() puts in the tensor).
  std::vector<int64_t> tokens(std::size_t index) const;

  const GptSampleIndex& sample_index() const { return index_; }
  const GptDatasetOptions& options() const { return options_; }
  // Samples the index holds (whole epochs: at least size()).
  int64_t available_samples() const { return index_.samples(); }

 private:
  std::shared_ptr<const IndexedDataset> data_;
  GptDatasetOptions options_;
  std::vector<int32_t> sizes_;  // tokens of every sequence of the dataset
  GptSampleIndex index_;
};

}  // namespace scaffold::llm
