// The learning-rate schedule (docs/benchmark.md): torch's CosineAnnealingWarmRestarts stepped once
// per epoch, as a pure function of the number of steps taken, so a restarted run recomputes the LR
// from its epoch counter instead of restoring scheduler state. It does not touch an optimiser.
#pragma once

#include <cstdint>

namespace scaffold::train {

class CosineWarmRestarts {
 public:
  // lr0: the starting LR; eta_min: the floor each cycle anneals to; cycle i lasts T_0·T_mult^i
  // epochs. Throws core::Error unless T_0 >= 1 and T_mult >= 1.
  CosineWarmRestarts(double lr0, double eta_min, int64_t T_0, int64_t T_mult);
  // disable_scheduler: lr0 in every epoch.
  static CosineWarmRestarts disabled(double lr0);

  // The LR in force after `epochs_completed` scheduler steps (0 -> lr0). With T_cur the epochs
  // elapsed in the current cycle of length T_i: eta_min + (lr0 − eta_min)(1 + cos(π·T_cur/T_i))/2,
  // in torch's order of operations.
  double lr_after(int64_t epochs_completed) const;

  bool is_disabled() const { return disabled_; }

 private:
  double lr0_;
  double eta_min_;
  int64_t T_0_;
  int64_t T_mult_;
  bool disabled_ = false;
};

}  // namespace scaffold::train
