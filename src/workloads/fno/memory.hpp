// CARAML's memory figures for the FNO (PeakFwdMem, PersistentMem, ActivationMem), measured on
// CPU as on CUDA: a tracker that LibTorch's allocators report every allocation and free to
// (c10's memory-reporting hook, the one the profiler uses), counting one device's bytes live and
// their peak while it is installed on the calling thread. Allocations made on other threads
// (OpenMP workers rarely allocate) are not seen. Not a general profiler: one scope at a time.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

#include "data/batch_loader.hpp"
#include "workloads/fno/task.hpp"

namespace scaffold::fno {

class MemoryTracker {
 public:
  explicit MemoryTracker(c10::Device device);
  ~MemoryTracker();
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;
  // Bytes allocated on the device since construction and still live (frees of blocks allocated
  // before construction are not counted), and the highest that value reached.
  int64_t live_bytes() const;
  int64_t peak_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct MemoryFigures {
  int64_t persistent_bytes = 0;    // parameters + gradients + Adam's two moments + buffers
  int64_t peak_forward_bytes = 0;  // persistent + the batch + the peak during one training forward
  int64_t activation_bytes = 0;    // what that forward leaves allocated for backward (and the loss)
};

// One training forward and loss of `batch` (host tensors) through the task, measured, then
// discarded (no backward, no step: the model and every RNG stay as they were). Collective when
// the task is sharded.
MemoryFigures measure_memory(FnoTask& task, const data::Batch& batch, c10::Device device);

}  // namespace scaffold::fno
