// A watchdog thread: calls a handler when the owner has not reported progress (beat()) for a
// given time. The last resort against a multi-rank job that stops making progress without an
// error (a rank stuck in a collective, a hung file system): the handler ends the job instead of
// letting it sit until the scheduler's time limit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace scaffold::core {

class Watchdog {
 public:
  // timeout_s <= 0: disabled (no thread). on_timeout(idle_s) runs on the watchdog's thread, once.
  Watchdog(double timeout_s, std::function<void(double idle_s)> on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void beat();  // progress: restarts the countdown
  bool enabled() const { return timeout_s_ > 0; }

 private:
  void watch();

  double timeout_s_;
  std::function<void(double)> on_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::chrono::steady_clock::time_point last_beat_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace scaffold::core
