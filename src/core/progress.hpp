// Progress of long work: an in-place line on a terminal (rate-limited to ~10 Hz), and on a
// pipe or file an INFO line at most every `log_interval_s`, so batch logs stay readable.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/timer.hpp"

namespace scaffold::core {

class Progress {
 public:
  Progress(std::string what, uint64_t total, double log_interval_s = 30.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t n = 1);  // thread-safe
  void finish();             // clears the terminal line
  uint64_t done() const { return done_.load(); }

 private:
  void draw(uint64_t done, bool force);

  std::string what_;
  uint64_t total_;
  double log_interval_s_;
  std::atomic<uint64_t> done_{0};
  std::mutex mutex_;
  Stopwatch clock_;
  double last_draw_s_ = -1.0;
  double last_log_s_ = 0.0;
  bool finished_ = false;
};

}  // namespace scaffold::core
