#include "core/watchdog.hpp"

#include <chrono>

namespace scaffold::core {

Watchdog::Watchdog(double timeout_s, std::function<void(double)> on_timeout)
    : timeout_s_(timeout_s),
      on_timeout_(std::move(on_timeout)),
      last_beat_(std::chrono::steady_clock::now()) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::beat() {
  if (timeout_s_ <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  last_beat_ = std::chrono::steady_clock::now();
}

void Watchdog::watch() {
  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(timeout_s_));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const auto deadline = last_beat_ + timeout;
    if (wake_.wait_until(lock, deadline, [this] { return stop_; })) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_beat_ >= timeout) {
      const double idle = std::chrono::duration<double>(now - last_beat_).count();
      lock.unlock();
      on_timeout_(idle);
      return;
    }
  }
}

}  // namespace scaffold::core
