// CosineAnnealingWarmRestarts replayed step by step (torch's step() with epoch=None): T_cur
// advances by one per epoch and wraps to 0 with T_i *= T_mult when it reaches T_i. Whole cycles
// are skipped at once, so the cost grows with the number of restarts, not of epochs.
#include "train/schedule.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "core/numbers.hpp"

namespace scaffold::train {

CosineWarmRestarts::CosineWarmRestarts(double lr0, double eta_min, int64_t T_0, int64_t T_mult)
    : lr0_(lr0), eta_min_(eta_min), T_0_(T_0), T_mult_(T_mult) {
  if (T_0 < 1) throw core::Error(fmt::format("T_0 must be an integer >= 1, got {}", T_0));
  if (T_mult < 1) throw core::Error(fmt::format("T_mult must be an integer >= 1, got {}", T_mult));
}

CosineWarmRestarts CosineWarmRestarts::disabled(double lr0) {
  CosineWarmRestarts schedule(lr0, lr0, 1, 1);
  schedule.disabled_ = true;
  return schedule;
}

double CosineWarmRestarts::lr_after(int64_t epochs_completed) const {
  if (epochs_completed < 0)
    throw core::Error(
        fmt::format("lr_after: epochs_completed must be >= 0, got {}", epochs_completed));
  if (disabled_) return lr0_;
  int64_t t_cur = 0;
  int64_t t_i = T_0_;
  int64_t left = epochs_completed;
  if (T_mult_ == 1) {
    t_cur = left % T_0_;  // every cycle has the same length
  } else {
    while (left >= t_i - t_cur) {  // reaches the end of this cycle: restart
      left -= t_i - t_cur;
      t_cur = 0;
      t_i *= T_mult_;
    }
    t_cur += left;
  }
  // torch: eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * T_cur / T_i)) / 2
  const double angle = core::kPi * static_cast<double>(t_cur) / static_cast<double>(t_i);
  return eta_min_ + (lr0_ - eta_min_) * (1.0 + std::cos(angle)) / 2.0;
}

}  // namespace scaffold::train
