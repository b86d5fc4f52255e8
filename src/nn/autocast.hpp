// Autocast state as a value: a snapshot of the CPU and CUDA autocast flags, their lower-precision
// dtypes and the cast-cache flag, plus an RAII guard that applies one and restores the previous.
// Activation checkpointing replays the forward's state in the recompute; the U-Net turns autocast
// off around ops kept in float32. Only CPU and CUDA are handled (no XPU/HPU/MPS autocast).
#pragma once

#include <c10/core/ScalarType.h>

namespace scaffold::nn {

struct AutocastState {
  bool cpu_enabled = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16;
  bool cuda_enabled = false;
  c10::ScalarType cuda_dtype = c10::kHalf;
  bool cache_enabled = true;  // the weight-cast cache (cleared by whoever owns the autocast region)

  // The calling thread's current state.
  static AutocastState current();
  // This state with autocast off on every device (dtypes and cache flag kept).
  AutocastState disabled() const;
  bool any_enabled() const { return cpu_enabled || cuda_enabled; }
};

// Applies `state` to the calling thread for its lifetime, then restores the state it replaced.
class AutocastGuard {
 public:
  explicit AutocastGuard(const AutocastState& state);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

}  // namespace scaffold::nn
