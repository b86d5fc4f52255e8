#include "core/progress.hpp"

#include <fmt/format.h>

#include "core/log.hpp"

namespace scaffold::core {

Progress::Progress(std::string what, uint64_t total, double log_interval_s)
    : what_(std::move(what)), total_(total), log_interval_s_(log_interval_s) {}

Progress::~Progress() {
  finish();
}

void Progress::add(uint64_t n) {
  const uint64_t done = done_.fetch_add(n) + n;
  draw(done, false);
}

void Progress::draw(uint64_t done, bool force) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  const double t = clock_.elapsed_s();
  const double rate = t > 0 ? static_cast<double>(done) / t : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / rate : 0.0;
  const double pct =
      total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
  const std::string text =
      fmt::format("{}: {}/{} ({:.0f}%), {:.1f}/s, {:.0f} s elapsed, ETA {:.0f} s", what_, done,
                  total_, pct, rate, t, eta);
  if (stderr_is_terminal()) {
    if (force || last_draw_s_ < 0 || t - last_draw_s_ >= 0.1) {
      log_progress_line(text);
      last_draw_s_ = t;
    }
  } else if (t - last_log_s_ >= log_interval_s_ && done < total_) {
    last_log_s_ = t;
    LOG_INFO("{}", text);
  }
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  log_progress_line("");
}

}  // namespace scaffold::core
