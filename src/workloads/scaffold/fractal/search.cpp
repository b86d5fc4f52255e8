#include "workloads/scaffold/fractal/search.hpp"

#include <algorithm>
#include <cmath>

#include "core/threads.hpp"
#include "workloads/scaffold/fractal/chaos_game.hpp"

namespace scaffold::fractal {

void SearchCounts::add(Verdict verdict) {
  ++attempts;
  switch (verdict) {
    case Verdict::Accepted:
      ++accepted;
      break;
    case Verdict::Runaway:
      ++runaway;
      break;
    case Verdict::InvalidValue:
      ++invalid_value;
      break;
    case Verdict::LowVariance:
      ++low_variance;
      break;
  }
}

void SearchCounts::add(const SearchCounts& o) {
  attempts += o.attempts;
  accepted += o.accepted;
  runaway += o.runaway;
  invalid_value += o.invalid_value;
  low_variance += o.low_variance;
}

namespace {

constexpr double kAssumedAcceptRate = 0.05;

}  // namespace

AttemptBatch evaluate_attempts(const SearchOptions& options, uint64_t first, uint64_t count,
                               int threads) {
  const int lanes = lanes_for_points(options.point_num);
  const std::size_t groups = (count + lanes - 1) / lanes;
  const std::size_t cloud_doubles = static_cast<std::size_t>(options.point_num) * 3;
  std::vector<Verdict> verdicts(count);
  std::vector<IfsParams> candidates(count);
  const int workers = std::max(1, std::min<int>(threads, static_cast<int>(groups)));
  std::vector<std::vector<double>> buffers(static_cast<std::size_t>(workers) * lanes);

  core::parallel_for(groups, workers, [&](int worker, std::size_t g) {
    const uint64_t begin = g * lanes;
    const int used = static_cast<int>(std::min<uint64_t>(lanes, count - begin));
    const IfsParams* params[kLanes];
    uint64_t keys[kLanes];
    double* outs[kLanes];
    bool runaway[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const int src = l < used ? l : 0;  // pad a partial group with copies of lane 0
      const uint64_t attempt = first + begin + src;
      if (l < used) candidates[begin + l] = sample_candidate(options.seed, attempt);
      auto& buffer = buffers[static_cast<std::size_t>(worker) * lanes + (src % lanes)];
      if (buffer.size() != cloud_doubles) buffer.resize(cloud_doubles);
      params[l] = &candidates[begin + src];
      keys[l] = candidate_points_key(options.seed, attempt);
      outs[l] = buffer.data();
    }
    if (lanes == kLanes) {
      chaos_game_lanes(params, keys, options.point_num, outs, runaway);
    } else {
      runaway[0] = chaos_game_reference(*params[0], keys[0], options.point_num, outs[0]);
    }
    for (int l = 0; l < used; ++l)
      verdicts[begin + l] = check_cloud(outs[l], options.point_num, runaway[l],
                                        options.variance_threshold, options.normalize);
  });

  AttemptBatch batch;
  for (uint64_t k = 0; k < count; ++k) {
    batch.counts.add(verdicts[k]);
    if (verdicts[k] == Verdict::Accepted) batch.accepted.push_back({first + k, candidates[k]});
  }
  return batch;
}

void CategorySelector::add(const AttemptBatch& batch) {
  counts_.add(batch.counts);
  for (const auto& candidate : batch.accepted) {
    if (done()) return;
    const bool duplicate = std::any_of(chosen_.begin(), chosen_.end(),
                                       [&](const auto& c) { return c.params == candidate.params; });
    if (duplicate) {
      ++duplicates_;
      continue;
    }
    chosen_.push_back(candidate);
  }
}

uint64_t round_attempts(const SearchCounts& so_far, int remaining, uint64_t max_per_round) {
  // Before anything is accepted, assume a pessimistic 5% accept rate rather than spending the
  // whole budget at once (ScaFFold does the latter; at scale 11 one attempt is 33 M points).
  const uint64_t thousands = so_far.attempts / 1000;  // the assumed rate falls per 1000 attempts
  const double rate = so_far.accepted == 0 ? kAssumedAcceptRate / static_cast<double>(1 + thousands)
                                           : static_cast<double>(so_far.accepted) /
                                                 static_cast<double>(so_far.attempts);
  const auto needed = static_cast<uint64_t>(std::ceil(1.1 * remaining / rate));
  return std::clamp<uint64_t>(needed, 1, std::max<uint64_t>(1, max_per_round));
}

std::vector<AcceptedCandidate> search_categories(const SearchOptions& options, int wanted,
                                                 int threads, uint64_t max_per_round,
                                                 SearchCounts* counts) {
  CategorySelector selector(wanted);
  uint64_t next = 0;
  while (!selector.done()) {
    const uint64_t n = round_attempts(selector.counts(), selector.remaining(), max_per_round);
    selector.add(evaluate_attempts(options, next, n, threads));
    next += n;
  }
  if (counts) *counts = selector.counts();
  return selector.chosen();
}

}  // namespace scaffold::fractal
