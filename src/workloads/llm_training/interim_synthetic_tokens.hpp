// The stand-in synthetic token source from before the data side (data/: SyntheticTokens,
// GptDataset, make_gpt_sources) was merged. Only two MPI tests still use it
// (test_gpt_parallel_mpi, test_distributed_optimizer_mpi); once they take llm::SyntheticTokens
// this file goes. Example i is one field, tokens (S + 1) int64, uniform over [0, vocab_size),
// deterministic from (seed, offset + i); inputs are tokens[:-1], labels tokens[1:].
#pragma once

#include <cstdint>

#include "dataset/example_source.hpp"

namespace scaffold::llm {

class InterimSyntheticTokens : public dataset::ExampleSource {
 public:
  InterimSyntheticTokens(int64_t count, int64_t seq_length, int64_t vocab_size, uint64_t seed, int64_t offset);
  std::size_t size() const override { return static_cast<std::size_t>(count_); }
  dataset::Example get(std::size_t index, uint64_t draw) const override;

 private:
  int64_t count_, seq_length_, vocab_size_;
  uint64_t seed_;
  int64_t offset_;
};

}  // namespace scaffold::llm
