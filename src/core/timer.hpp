// Monotonic wall-clock timing for phases and throughput figures.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

namespace scaffold::core {

// Seconds on the steady clock since its epoch: the time base of timing and energy windows.
inline double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// The fastest of `rounds` timed calls of `pass` after `warmup` untimed ones, in ms: what an
// in-process probe compares kernels by (the first call pays for caches, allocation and JIT).
template <typename Pass>
double best_time_ms(Pass&& pass, int warmup = 1, int rounds = 2) {
  for (int i = 0; i < warmup; ++i) pass();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < rounds; ++i) {
    const Stopwatch clock;
    pass();
    best = std::min(best, clock.elapsed_s() * 1e3);
  }
  return best;
}

}  // namespace scaffold::core
