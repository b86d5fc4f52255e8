// Per-replica sample orders (docs/dataset.md): torch DistributedSampler's shuffle-pad-stride for
// training, contiguous unpadded ranges for validation. The shuffle is ours (keyed xoshiro), not
// torch's randperm, so orders match torch's structure but not its exact permutation.
#include "data/sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::data {
namespace {

constexpr uint64_t kSamplerStream = 4;  // stream id of the training shuffle

void check_arguments(int64_t n, int replicas, int replica) {
  if (n < 0) throw core::Error(fmt::format("sampler: sample count {} must be >= 0", n));
  if (replicas < 1) throw core::Error(fmt::format("sampler: replicas {} must be >= 1", replicas));
  if (replica < 0 || replica >= replicas)
    throw core::Error(fmt::format("sampler: replica {} must be in [0, {}) for {} replicas", replica,
                                  replicas, replicas));
}

}  // namespace

std::vector<int64_t> training_indices(int64_t n, int replicas, int replica, uint64_t seed,
                                      int64_t epoch) {
  check_arguments(n, replicas, replica);
  if (n == 0) return {};

  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  core::Xoshiro256p rng(core::stream_key({seed, kSamplerStream, static_cast<uint64_t>(epoch)}));
  for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);

  // Pad to a multiple of R by wrapping around the permutation (more than once when n < R), so
  // every replica takes the same number of steps per epoch; then replica k strides from k.
  const int64_t per_replica = (n + replicas - 1) / replicas;
  const int64_t total = per_replica * replicas;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_replica));
  for (int64_t i = replica; i < total; i += replicas)
    mine.push_back(perm[static_cast<std::size_t>(i % n)]);
  return mine;
}

std::vector<int64_t> validation_indices(int64_t n, int replicas, int replica) {
  check_arguments(n, replicas, replica);
  const int64_t base = n / replicas;
  const int64_t extra = n % replicas;  // the first `extra` replicas get one more sample
  const int64_t begin = replica * base + std::min<int64_t>(replica, extra);
  const int64_t count = base + (replica < extra ? 1 : 0);
  std::vector<int64_t> mine(static_cast<std::size_t>(count));
  std::iota(mine.begin(), mine.end(), begin);
  return mine;
}

std::vector<int64_t> stream_indices(int64_t n, int replicas, int replica, int64_t first_step,
                                    int64_t steps, int64_t micro_batch, int64_t accumulation) {
  check_arguments(n, replicas, replica);
  if (n < 1) throw core::Error("stream sampler: the source holds no sample");
  if (first_step < 0 || steps < 0 || micro_batch < 1 || accumulation < 1)
    throw core::Error(
        fmt::format("stream sampler: first_step {} and steps {} must be >= 0, micro_batch {} and "
                    "accumulation {} >= 1",
                    first_step, steps, micro_batch, accumulation));
  const int64_t per_micro = micro_batch * replicas;
  const int64_t global = per_micro * accumulation;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(steps * accumulation * micro_batch));
  for (int64_t t = first_step; t < first_step + steps; ++t)
    for (int64_t m = 0; m < accumulation; ++m) {
      const int64_t begin = t * global + m * per_micro + replica * micro_batch;
      for (int64_t j = 0; j < micro_batch; ++j) mine.push_back((begin + j) % n);
    }
  return mine;
}

}  // namespace scaffold::data
