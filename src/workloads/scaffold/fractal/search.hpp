// Category search (docs/fractals.md, made deterministic): attempt i draws its candidate and its
// point stream from (seed, stream, i) alone, and the library's categories are the first n accepted
// candidates in attempt order. So the result does not depend on how attempts are spread over
// threads, ranks or rounds; rounds only decide how much work may be wasted past the n-th accept.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/scaffold/fractal/acceptance.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::fractal {

struct SearchOptions {
  uint64_t seed = 42;
  int64_t point_num = 8192;  // points per candidate cloud
  double variance_threshold = 0.15;
  double normalize = 1.0;
};

struct SearchCounts {
  uint64_t attempts = 0;
  uint64_t accepted = 0;
  uint64_t runaway = 0;
  uint64_t invalid_value = 0;
  uint64_t low_variance = 0;
  void add(Verdict verdict);
  void add(const SearchCounts& other);
};

struct AcceptedCandidate {
  uint64_t attempt = 0;
  IfsParams params;
};

struct AttemptBatch {
  std::vector<AcceptedCandidate> accepted;  // in attempt order
  SearchCounts counts;
};

// Evaluates attempts [first, first + count) on up to `threads` threads.
AttemptBatch evaluate_attempts(const SearchOptions& options, uint64_t first, uint64_t count,
                               int threads);

// Collects accepted candidates, fed in attempt order, until `wanted` distinct ones are held.
class CategorySelector {
 public:
  explicit CategorySelector(int wanted) : wanted_(wanted) {}
  // Feeds a batch whose attempts all come after the previous batch's.
  void add(const AttemptBatch& batch);
  bool done() const { return static_cast<int>(chosen_.size()) >= wanted_; }
  int remaining() const { return wanted_ - static_cast<int>(chosen_.size()); }
  const std::vector<AcceptedCandidate>& chosen() const { return chosen_; }
  const SearchCounts& counts() const { return counts_; }
  uint64_t duplicates_skipped() const { return duplicates_; }

 private:
  int wanted_;
  std::vector<AcceptedCandidate> chosen_;
  SearchCounts counts_;
  uint64_t duplicates_ = 0;
};

// Attempts per round: enough for 1.1x the remaining categories at the observed accept rate
// (docs/fractals.md), at a pessimistic assumed rate while nothing has been accepted yet, capped by
// max_per_round and at least 1.
uint64_t round_attempts(const SearchCounts& so_far, int remaining, uint64_t max_per_round);

// Single-process search: the reference the distributed driver must reproduce.
std::vector<AcceptedCandidate> search_categories(const SearchOptions& options, int wanted,
                                                 int threads, uint64_t max_per_round,
                                                 SearchCounts* counts = nullptr);

}  // namespace scaffold::fractal
