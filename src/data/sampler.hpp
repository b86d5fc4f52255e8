// Which samples each data-parallel replica visits (docs/dataset.md), as index lists into a split.
// Training: shuffled per epoch, padded by wrapping so every replica gets ceil(n / R) samples,
// replica k takes every R-th index starting at k (torch DistributedSampler semantics).
// Validation: contiguous and unpadded; replica k gets [k*b + min(k, r), ...) with b, r = divmod(n,
// R). Iterations over a stream (the LLM workload): Megatron's sequential order, see stream_indices.
#pragma once

#include <cstdint>
#include <vector>

namespace scaffold::data {

// The shuffle is keyed by (seed, epoch) only, so every rank of a spatial group (and every run
// with the same seed) sees the same order.
std::vector<int64_t> training_indices(int64_t n, int replicas, int replica, uint64_t seed,
                                      int64_t epoch);

std::vector<int64_t> validation_indices(int64_t n, int replicas, int replica);

// Megatron's pretraining order over an endless stream (its MegatronPretrainingSampler): optimizer
// step t (0-based over the run) consumes the global batch of stream samples [t*G, (t+1)*G),
// G = replicas * micro_batch * accumulation, as `accumulation` micro-batches of replicas *
// micro_batch consecutive samples, of which replica r takes [r*micro_batch, (r+1)*micro_batch).
// Stream sample g is example g mod n (the dataset's own shuffle, if any, is inside the source).
// Returns this replica's indices for steps [first_step, first_step + steps), micro-batch by
// micro-batch. Throws core::Error when n < 1 or a count is negative.
std::vector<int64_t> stream_indices(int64_t n, int replicas, int replica, int64_t first_step,
                                    int64_t steps, int64_t micro_batch, int64_t accumulation);

}  // namespace scaffold::data
