// Chaos-game throughput (points/s): the reference kernel (one cloud, latency-bound) against the
// interleaved kernel (kLanes clouds in lockstep), on one thread and on all threads, over the
// category-search workload (random candidates, runaways included). Ratios are measured side by
// side in one run. Usage: bench_chaos_game [point_num=8192] [clouds=2048] [threads=all]
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "core/stats.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "workloads/scaffold/fractal/chaos_game.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"

using namespace scaffold;

namespace {

struct Workload {
  std::vector<fractal::IfsParams> params;
  std::vector<uint64_t> keys;
};

double run_reference(const Workload& w, int64_t n, int threads) {
  std::vector<std::vector<double>> bufs(threads, std::vector<double>(3 * n));
  core::Stopwatch clock;
  core::parallel_for(w.params.size(), threads, [&](int worker, std::size_t i) {
    fractal::chaos_game_reference(w.params[i], w.keys[i], n, bufs[worker].data());
  });
  return static_cast<double>(w.params.size()) * n / clock.elapsed_s();
}

double run_lanes(const Workload& w, int64_t n, int threads) {
  const int L = fractal::kLanes;
  std::vector<std::vector<double>> bufs(threads * L, std::vector<double>(3 * n));
  core::Stopwatch clock;
  core::parallel_for(w.params.size() / L, threads, [&](int worker, std::size_t g) {
    const fractal::IfsParams* p[fractal::kLanes];
    uint64_t k[fractal::kLanes];
    double* o[fractal::kLanes];
    bool r[fractal::kLanes];
    for (int l = 0; l < L; ++l) {
      p[l] = &w.params[g * L + l];
      k[l] = w.keys[g * L + l];
      o[l] = bufs[worker * L + l].data();
    }
    fractal::chaos_game_lanes(p, k, n, o, r);
  });
  return static_cast<double>(w.params.size()) * n / clock.elapsed_s();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 8192;
  const std::size_t clouds = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2048;
  const int all = argc > 3 ? std::atoi(argv[3]) : core::default_thread_count();
  Workload w;
  for (std::size_t i = 0; i < clouds; ++i) {
    w.params.push_back(fractal::sample_candidate(42, i));
    w.keys.push_back(fractal::candidate_points_key(42, i));
  }
  fmt::print("chaos game: {} clouds x {} points, float64, median of 5 alternating runs\n", clouds,
             n);
  fmt::print("{:<28} {:>8} {:>16} {:>18}\n", "kernel", "threads", "points/s", "points/s/thread");
  for (int threads : {1, all}) {
    std::vector<double> ref, lanes;
    for (int rep = 0; rep < 5; ++rep) {
      ref.push_back(run_reference(w, n, threads));
      lanes.push_back(run_lanes(w, n, threads));
    }
    const double r = core::median(ref), l = core::median(lanes);
    fmt::print("{:<28} {:>8} {:>16.4g} {:>18.4g}\n", "reference (1 cloud)", threads, r,
               r / threads);
    fmt::print("{:<28} {:>8} {:>16.4g} {:>18.4g}\n",
               fmt::format("interleaved ({} clouds)", fractal::kLanes), threads, l, l / threads);
    fmt::print("{:<28} {:>8} {:>16.2f}x\n", "speed-up", threads, l / r);
    if (all == 1) break;
  }
  return 0;
}
