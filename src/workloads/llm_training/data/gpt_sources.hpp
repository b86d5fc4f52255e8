// The LLM workload's training and validation data for a config: synthetic tokens when no data
// path is given (the quickstart needs no files), else the train and validation splits of a
// Megatron indexed dataset (Megatron's --data-path prefix and --split). The model side calls
// make_gpt_sources; the test split is never read (Megatron evaluates it only after training).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "data/example_source.hpp"
#include "workloads/llm_training/data/synthetic_tokens.hpp"

namespace scaffold::llm {

struct GptDataOptions {
  std::string data_path;           // prefix of <prefix>.bin/.idx; empty: synthetic tokens
  std::string split = "969,30,1";  // Megatron's --split (train, validation, test weights)
  int64_t seq_length = 2048;
  uint64_t seed = 42;          // Megatron's --seed: document and sample shuffling (< 2^32)
  int64_t train_samples = 0;   // samples the run trains on (Megatron: train_iters x global batch)
  int64_t valid_samples = 0;   // samples of all validation passes (0: no validation source data)
  int64_t vocab_size = 50257;  // the model's vocabulary: every token must be below it
  // Indexed dataset: at most this many samples are indexed per split (about 14 bytes each per
  // rank); asking for more indexes this many, logs a warning, and the training stream repeats
  // them (the order is then not Megatron's, whose index has every sample it was asked for).
  int64_t max_index_samples = 10000000;
  // Synthetic data only.
  SyntheticTokenPattern synthetic_pattern = SyntheticTokenPattern::kUniform;
  int64_t synthetic_corpus_length = 64;
};

struct GptSources {
  // train_samples and valid_samples examples (each at most max_index_samples; valid may be none).
  std::unique_ptr<data::ExampleSource> train, valid;
  std::string description;  // one line for the log: what the data is
  std::string name;         // the Dataset column: "synthetic", or the data path's file name
  bool synthetic = true;
  // Indexed dataset only: its documents, Megatron's split boundaries, and the passes over each
  // split's documents that the sample indices span.
  int64_t documents = 0;
  std::array<int64_t, 4> split_bounds{};
  int64_t train_epochs = 0, valid_epochs = 0;
};

// Throws core::Error for options out of range (train_samples < 1, valid_samples < 0,
// seq_length < 1, seed >= 2^32 with a data path), core::FileError naming the file for an
// unreadable or malformed dataset, a split with no document where samples are asked of it, or a
// split whose documents together are shorter than one sample. Logs Megatron's dataset lines.
GptSources make_gpt_sources(const GptDataOptions& options);

}  // namespace scaffold::llm
