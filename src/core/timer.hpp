// Monotonic wall-clock timing for phases and throughput figures.
#pragma once

#include <chrono>

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

}  // namespace scaffold::core
