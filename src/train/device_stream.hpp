// The training loop's per-step seam to the device: a StepClock that marks each step on the
// device's own timeline and is read once per epoch (ScaFFold brackets steps with CUDA events;
// docs/benchmark.md), and a DeviceFeeder that copies the next batch to the device while the
// current step computes (pinned host memory, a side stream). Neither waits for the device inside a
// step: the only waits are collect_s() (once per epoch) and the compute stream waiting for a copy,
// on the device. CPU implementations here (steady clock, plain copies); CUDA ones in
// device_stream_cuda.cpp, compiled only when LibTorch has CUDA (device_stream_none.cpp else).
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <vector>

#include "data/batch_loader.hpp"

namespace scaffold::train {

class StepClock {
 public:
  virtual ~StepClock() = default;
  // Marks the start and the end of one step. Never waits for the device.
  virtual void start() = 0;
  virtual void stop() = 0;
  // Each marked step's duration (s), in order, since the last call; then forgets them. Waits for
  // the device to reach the last mark: call it once per epoch, never inside a step.
  virtual std::vector<double> collect_s() = 0;
};

class DeviceFeeder {
 public:
  virtual ~DeviceFeeder() = default;
  // Starts copying a host batch to the device (asynchronously from pinned memory on CUDA, on a
  // stream of its own). The host tensors may be dropped afterwards.
  virtual void prefetch(const data::Batch& host) = 0;
  // The oldest prefetched batch, on the device and usable by the current (compute) stream, which
  // waits for its copy on the device; the host does not wait. Prefetch first (checked).
  virtual data::Batch take() = 0;
  virtual bool empty() const = 0;  // nothing prefetched and not yet taken
};

// The seam for `device`: CUDA events and a copy stream on a CUDA device (in a CUDA build), the
// steady clock and plain copies otherwise.
std::unique_ptr<StepClock> make_step_clock(const c10::Device& device);
std::unique_ptr<DeviceFeeder> make_device_feeder(const c10::Device& device);

// The CPU implementations, whatever the build (the factories above use them off CUDA).
std::unique_ptr<StepClock> make_host_step_clock();
// The steady clock around `wait_for_device` at every mark, for a GPU whose events this build
// cannot record (a ROCm LibTorch's HIP devices, docs/deploy.md "AMD GPUs"): exact, at the cost
// of one device synchronisation per mark, so unlike the CUDA clock it does wait.
std::unique_ptr<StepClock> make_synchronizing_step_clock(std::function<void()> wait_for_device);
std::unique_ptr<DeviceFeeder> make_host_device_feeder(const c10::Device& device);

}  // namespace scaffold::train
