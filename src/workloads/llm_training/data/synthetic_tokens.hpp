// Synthetic token sequences, the LLM workload's default data (no files needed): example i is
// seq_length + 1 int64 tokens drawn from a stream keyed by (seed, offset + i) alone, so any
// thread, rank or loader-worker count sees the same data. Two patterns: uniform tokens (nothing
// to learn; loss stays near ln(vocab_size), as for CARAML's throughput runs), or windows of one
// short random corpus repeated end to end, which a tiny GPT learns within a few hundred steps
// (each corpus token is distinct, so the next token follows from the current one).
#pragma once

#include <cstdint>
#include <vector>

#include "data/example_source.hpp"

namespace scaffold::llm {

enum class SyntheticTokenPattern {
  kUniform,         // every token uniform in [0, vocab_size)
  kRepeatedCorpus,  // tokens[t] = corpus[(start + t) % corpus_length], start drawn per example
};

struct SyntheticTokensOptions {
  int64_t count = 1024;  // examples in this source (0: an empty source)
  int64_t seq_length = 2048;
  int64_t vocab_size = 50257;
  uint64_t seed = 42;
  int64_t offset = 0;  // global index of example 0: train {0, n} and valid {n, m} are disjoint
  SyntheticTokenPattern pattern = SyntheticTokenPattern::kUniform;
  int64_t corpus_length = 64;  // kRepeatedCorpus: distinct tokens when <= vocab_size
};

class SyntheticTokens : public data::ExampleSource {
 public:
  // Throws core::Error when count < 0, seq_length < 1, vocab_size < 2, offset < 0 or
  // corpus_length < 1.
  explicit SyntheticTokens(SyntheticTokensOptions options = {});

  std::size_t size() const override { return static_cast<std::size_t>(options_.count); }
  // Fields: tokens (seq_length + 1) int64. id: "synthetic/<offset + index>". `draw` is ignored.
  data::Example get(std::size_t index, uint64_t draw) const override;

  // The repeated corpus (kRepeatedCorpus), (corpus_length,), for tests.
  const std::vector<int64_t>& corpus() const { return corpus_; }
  const SyntheticTokensOptions& options() const { return options_; }

 private:
  SyntheticTokensOptions options_;
  std::vector<int64_t> corpus_;
};

}  // namespace scaffold::llm
