// The tensor-parallel split of the GPT's parameters, written from Megatron's layer roles for the
// MPI tests (independently of GptImpl::is_tensor_parallel), and a rank's slice of a whole tensor.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace scaffold::test {

// Which dimension of a parameter tensor parallelism splits (-1: replicated).
inline int split_dim(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("word_embeddings") || ends("qkv_weight") || ends("qkv_bias") || ends("fc1_weight") ||
      ends("fc1_bias"))
    return 0;  // column-parallel outputs and vocabulary rows
  if (ends("dense_weight") || ends("fc2_weight")) return 1;  // row-parallel inputs
  return -1;
}

// Rank `rank`'s block of `full` along `dim` split in `t` equal parts (dim < 0: all of it).
inline at::Tensor slice_of(const at::Tensor& full, int dim, int t, int rank) {
  if (dim < 0) return full;
  const int64_t part = full.size(dim) / t;
  return full.narrow(dim, rank * part, part);
}

}  // namespace scaffold::test
