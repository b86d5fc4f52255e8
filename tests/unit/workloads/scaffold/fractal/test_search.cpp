// The category search is deterministic whatever the threads, chunking and round sizes.
#include <gtest/gtest.h>

#include <vector>

#include "workloads/scaffold/fractal/chaos_game.hpp"
#include "workloads/scaffold/fractal/search.hpp"

namespace scaffold::fractal {
namespace {

SearchOptions small_options() {
  SearchOptions o;
  o.seed = 42;
  o.point_num = 512;  // scale 5 uses 128; a little more keeps the test meaningful and fast
  return o;
}

TEST(Search, AttemptBatchesDoNotDependOnThreadsOrSplits) {
  const SearchOptions o = small_options();
  const AttemptBatch whole = evaluate_attempts(o, 0, 64, 1);
  const AttemptBatch a = evaluate_attempts(o, 0, 29, 3);
  const AttemptBatch b = evaluate_attempts(o, 29, 35, 2);
  std::vector<AcceptedCandidate> joined = a.accepted;
  joined.insert(joined.end(), b.accepted.begin(), b.accepted.end());
  ASSERT_EQ(whole.accepted.size(), joined.size());
  for (std::size_t k = 0; k < joined.size(); ++k) {
    EXPECT_EQ(whole.accepted[k].attempt, joined[k].attempt);
    EXPECT_EQ(whole.accepted[k].params, joined[k].params);
  }
  EXPECT_EQ(whole.counts.attempts, 64u);
  EXPECT_EQ(whole.counts.accepted + whole.counts.runaway + whole.counts.invalid_value +
                whole.counts.low_variance,
            64u);
  EXPECT_GT(whole.counts.accepted, 0u) << "no candidate accepted in 64 attempts";
  EXPECT_GT(whole.counts.runaway + whole.counts.low_variance, 0u) << "nothing rejected";
}

TEST(Search, FirstNAcceptedWhateverTheRoundSize) {
  const SearchOptions o = small_options();
  const auto one = search_categories(o, 6, 1, 10000);
  const auto two = search_categories(o, 6, 2, 3);
  const auto big = search_categories(o, 6, 2, 500);
  ASSERT_EQ(one.size(), 6u);
  ASSERT_EQ(two.size(), 6u);
  for (std::size_t k = 0; k < one.size(); ++k) {
    EXPECT_EQ(one[k].attempt, two[k].attempt);
    EXPECT_EQ(one[k].attempt, big[k].attempt);
    EXPECT_EQ(one[k].params, two[k].params);
    if (k > 0) {
      EXPECT_LT(one[k - 1].attempt, one[k].attempt);
    }
  }
}

TEST(Search, ChosenCandidatesPassTheReferenceCheck) {
  const SearchOptions o = small_options();
  for (const auto& c : search_categories(o, 4, 2, 100)) {
    std::vector<double> cloud(3 * o.point_num);
    const bool runaway = chaos_game_reference(c.params, candidate_points_key(o.seed, c.attempt),
                                              o.point_num, cloud.data());
    EXPECT_EQ(check_cloud(cloud.data(), o.point_num, runaway, o.variance_threshold, o.normalize),
              Verdict::Accepted)
        << "attempt " << c.attempt;
  }
}

TEST(Search, RoundSizing) {
  SearchCounts none;
  EXPECT_GE(round_attempts(none, 5, 10000), 5u * 20u);  // pessimistic 5% start
  EXPECT_LE(round_attempts(none, 5, 10000), 10000u);
  SearchCounts seen;
  seen.attempts = 100;
  seen.accepted = 10;
  EXPECT_EQ(round_attempts(seen, 5, 10000), 55u);  // 1.1 * 5 / 0.1
  EXPECT_EQ(round_attempts(seen, 5, 20), 20u);
}

TEST(Search, SelectorSkipsExactDuplicates) {
  CategorySelector sel(2);
  AttemptBatch batch;
  const IfsParams p = sample_candidate(1, 1), q = sample_candidate(1, 2);
  batch.accepted = {{0, p}, {1, p}, {2, q}};
  sel.add(batch);
  ASSERT_TRUE(sel.done());
  EXPECT_EQ(sel.chosen()[1].attempt, 2u);
  EXPECT_EQ(sel.duplicates_skipped(), 1u);
}

}  // namespace
}  // namespace scaffold::fractal
