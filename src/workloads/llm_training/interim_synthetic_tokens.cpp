#include "workloads/llm_training/interim_synthetic_tokens.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/rng.hpp"

namespace scaffold::llm {

InterimSyntheticTokens::InterimSyntheticTokens(int64_t count, int64_t seq_length, int64_t vocab_size, uint64_t seed,
                                               int64_t offset)
    : count_(count), seq_length_(seq_length), vocab_size_(vocab_size), seed_(seed), offset_(offset) {}

dataset::Example InterimSyntheticTokens::get(std::size_t index, uint64_t /*draw*/) const {
  const uint64_t example = static_cast<uint64_t>(offset_) + index;
  core::Xoshiro256p rng(core::stream_key({seed_, 0x746f6b656e73ULL, example}));
  at::Tensor tokens = at::empty({seq_length_ + 1}, at::kLong);
  int64_t* out = tokens.data_ptr<int64_t>();
  for (int64_t i = 0; i <= seq_length_; ++i) out[i] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
  return {{tokens}, fmt::format("synthetic:{}", example)};
}

}  // namespace scaffold::llm
