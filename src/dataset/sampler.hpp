// Which samples each data-parallel replica visits (spec §6.2), as index lists into a split.
// Training: shuffled per epoch, padded by wrapping so every replica gets ceil(n / R) samples,
// replica k takes every R-th index starting at k (torch DistributedSampler semantics).
// Validation: contiguous and unpadded; replica k gets [k*b + min(k, r), ...) with b, r = divmod(n, R).
#pragma once

#include <cstdint>
#include <vector>

namespace scaffold::dataset {

// The shuffle is keyed by (seed, epoch) only, so every rank of a spatial group (and every run
// with the same seed) sees the same order.
std::vector<int64_t> training_indices(int64_t n, int replicas, int replica, uint64_t seed,
                                      int64_t epoch);

std::vector<int64_t> validation_indices(int64_t n, int replicas, int replica);

}  // namespace scaffold::dataset
