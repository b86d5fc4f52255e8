// The per-replica sample orders of docs/dataset.md: training shuffles, pads by wrapping and
// strides (torch DistributedSampler); validation cuts contiguous unpadded ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "data/sampler.hpp"

namespace scaffold::dataset {
namespace {
using data::training_indices;
using data::validation_indices;

using Indices = std::vector<int64_t>;

// Re-interleaves the replicas' lists into the padded epoch order they were strided from.
Indices interleave(const std::vector<Indices>& per_replica) {
  Indices out;
  for (std::size_t j = 0; j < per_replica[0].size(); ++j)
    for (const auto& r : per_replica) out.push_back(r.at(j));
  return out;
}

std::vector<Indices> all_training(int64_t n, int replicas, uint64_t seed, int64_t epoch) {
  std::vector<Indices> out;
  for (int k = 0; k < replicas; ++k) out.push_back(training_indices(n, replicas, k, seed, epoch));
  return out;
}

TEST(TrainingIndices, TenSamplesOverThreeReplicasPadWithTheFirstTwoOfThePermutation) {
  const auto replicas = all_training(10, 3, 0, 0);
  for (const auto& r : replicas) EXPECT_EQ(r.size(), 4u);

  // With one replica the sampler returns the unpadded permutation itself.
  const Indices perm = training_indices(10, 1, 0, 0, 0);
  Indices sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (Indices{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  // Replica k takes positions k, k+3, k+6, k+9 of perm ++ perm[0..2).
  const Indices padded = interleave(replicas);
  ASSERT_EQ(padded.size(), 12u);
  EXPECT_EQ(Indices(padded.begin(), padded.begin() + 10), perm);
  EXPECT_EQ(padded[10], perm[0]);
  EXPECT_EQ(padded[11], perm[1]);
  EXPECT_EQ(replicas[1], (Indices{perm[1], perm[4], perm[7], perm[0]}));
  EXPECT_EQ(replicas[2], (Indices{perm[2], perm[5], perm[8], perm[1]}));

  // Disjoint except the padding: exactly perm[0] and perm[1] appear twice overall.
  std::array<int, 10> count{};
  for (const auto& r : replicas)
    for (int64_t i : r) ++count.at(static_cast<std::size_t>(i));
  for (int64_t i = 0; i < 10; ++i) {
    const int expected = (i == perm[0] || i == perm[1]) ? 2 : 1;
    EXPECT_EQ(count[static_cast<std::size_t>(i)], expected) << "index " << i;
  }
}

TEST(TrainingIndices, OrderDependsOnlyOnSeedAndEpoch) {
  EXPECT_EQ(training_indices(10, 3, 1, 7, 5), training_indices(10, 3, 1, 7, 5));
  EXPECT_EQ(training_indices(10, 1, 0, 0, 0), training_indices(10, 1, 0, 0, 0));
  EXPECT_NE(training_indices(10, 1, 0, 0, 0), training_indices(10, 1, 0, 0, 1));
  EXPECT_NE(training_indices(10, 1, 0, 0, 0), training_indices(10, 1, 0, 1, 0));
  // Not the identity: the shuffle happened.
  EXPECT_NE(training_indices(10, 1, 0, 0, 0), (Indices{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(TrainingIndices, FewerSamplesThanReplicasWrapRepeatedly) {
  const Indices perm = training_indices(2, 1, 0, 3, 2);
  ASSERT_EQ(perm.size(), 2u);
  EXPECT_NE(perm[0], perm[1]);
  const auto replicas = all_training(2, 4, 3, 2);
  // Padded order perm[0], perm[1], perm[0], perm[1]: one sample each.
  EXPECT_EQ(replicas[0], (Indices{perm[0]}));
  EXPECT_EQ(replicas[1], (Indices{perm[1]}));
  EXPECT_EQ(replicas[2], (Indices{perm[0]}));
  EXPECT_EQ(replicas[3], (Indices{perm[1]}));

  // One sample, five replicas: everyone gets sample 0.
  for (int k = 0; k < 5; ++k) EXPECT_EQ(training_indices(1, 5, k, 0, 0), (Indices{0}));
  // No samples: nothing to pad with.
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(training_indices(0, 3, k, 0, 0).empty());
}

TEST(TrainingIndices, ShuffleIsUnbiased) {
  // Every value lands in every position about equally often over many epochs. A biased shuffle
  // (swap with any position, or a modulo-biased draw) misses by far more than 5 sigma here.
  constexpr int kEpochs = 20000;
  constexpr int kN = 4;
  std::array<std::array<int, kN>, kN> seen{};  // seen[position][value]
  for (int e = 0; e < kEpochs; ++e) {
    const Indices p = training_indices(kN, 1, 0, 11, e);
    for (int pos = 0; pos < kN; ++pos) ++seen[pos][static_cast<std::size_t>(p[pos])];
  }
  const double expected = kEpochs / double(kN);  // 5000; sigma = sqrt(20000 * 3/16) ~ 61
  for (int pos = 0; pos < kN; ++pos)
    for (int v = 0; v < kN; ++v)
      EXPECT_NEAR(seen[pos][v], expected, 300) << "value " << v << " at position " << pos;
}

TEST(ValidationIndices, ContiguousRangesFirstReplicasGetTheRemainder) {
  EXPECT_EQ(validation_indices(10, 3, 0), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(validation_indices(10, 3, 1), (Indices{4, 5, 6}));
  EXPECT_EQ(validation_indices(10, 3, 2), (Indices{7, 8, 9}));

  EXPECT_EQ(validation_indices(2, 4, 0), (Indices{0}));
  EXPECT_EQ(validation_indices(2, 4, 1), (Indices{1}));
  EXPECT_TRUE(validation_indices(2, 4, 2).empty());
  EXPECT_TRUE(validation_indices(2, 4, 3).empty());

  EXPECT_EQ(validation_indices(5, 1, 0), (Indices{0, 1, 2, 3, 4}));
}

TEST(ValidationIndices, RangesStartAtKTimesBPlusMinKRAndTileTheSplit) {
  for (int64_t n = 0; n <= 20; ++n) {
    for (int replicas = 1; replicas <= 6; ++replicas) {
      const int64_t b = n / replicas;
      const int64_t r = n % replicas;
      Indices all;
      for (int k = 0; k < replicas; ++k) {
        const Indices mine = validation_indices(n, replicas, k);
        const int64_t begin = k * b + std::min<int64_t>(k, r);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), b + (k < r ? 1 : 0)) << n << "/" << replicas;
        if (!mine.empty()) {
          EXPECT_EQ(mine.front(), begin) << n << "/" << replicas << " replica " << k;
        }
        all.insert(all.end(), mine.begin(), mine.end());
      }
      Indices expected(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) expected[static_cast<std::size_t>(i)] = i;
      EXPECT_EQ(all, expected) << n << " samples over " << replicas << " replicas";
    }
  }
}

TEST(Sampler, InvalidArgumentsThrow) {
  EXPECT_THROW(training_indices(10, 0, 0, 0, 0), core::Error);
  EXPECT_THROW(training_indices(10, 3, -1, 0, 0), core::Error);
  EXPECT_THROW(training_indices(10, 3, 3, 0, 0), core::Error);
  EXPECT_THROW(training_indices(-1, 3, 0, 0, 0), core::Error);
  EXPECT_THROW(validation_indices(10, 0, 0), core::Error);
  EXPECT_THROW(validation_indices(10, 3, -1), core::Error);
  EXPECT_THROW(validation_indices(10, 3, 3), core::Error);
  EXPECT_THROW(validation_indices(-1, 3, 0), core::Error);
}

}  // namespace
}  // namespace scaffold::dataset
