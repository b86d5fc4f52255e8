// The CPU side of the step seam: the steady clock (CPU kernels are synchronous, so a host
// stopwatch times the step exactly) and plain copies (to a CPU device: none at all).
#include "train/device_stream.hpp"

#include <deque>
#include <utility>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace scaffold::train {

namespace {

// The steady clock, around `wait` at every mark when one is given (make_synchronizing_step_clock).
class HostStepClock : public StepClock {
 public:
  explicit HostStepClock(std::function<void()> wait = {}) : wait_(std::move(wait)) {}
  void start() override {
    if (wait_) wait_();  // what was queued before the step is not the step's
    clock_.restart();
  }
  void stop() override {
    if (wait_) wait_();
    steps_s_.push_back(clock_.elapsed_s());
  }
  std::vector<double> collect_s() override {
    std::vector<double> out;
    out.swap(steps_s_);
    return out;
  }

 private:
  std::function<void()> wait_;
  core::Stopwatch clock_;
  std::vector<double> steps_s_;
};

class HostDeviceFeeder : public DeviceFeeder {
 public:
  explicit HostDeviceFeeder(c10::Device device) : device_(device) {}
  void prefetch(const data::Batch& host) override {
    data::Batch b;
    b.ids = host.ids;
    b.fields.reserve(host.fields.size());
    for (const at::Tensor& f : host.fields) b.fields.push_back(f.to(device_));
    pending_.push_back(std::move(b));
  }
  data::Batch take() override {
    SCAFFOLD_CHECK(!pending_.empty(), "DeviceFeeder::take() before prefetch()");
    data::Batch b = std::move(pending_.front());
    pending_.pop_front();
    return b;
  }
  bool empty() const override { return pending_.empty(); }

 private:
  c10::Device device_;
  std::deque<data::Batch> pending_;
};

}  // namespace

std::unique_ptr<StepClock> make_host_step_clock() {
  return std::make_unique<HostStepClock>();
}

std::unique_ptr<StepClock> make_synchronizing_step_clock(std::function<void()> wait_for_device) {
  SCAFFOLD_CHECK(static_cast<bool>(wait_for_device),
                 "make_synchronizing_step_clock without a wait");
  return std::make_unique<HostStepClock>(std::move(wait_for_device));
}

std::unique_ptr<DeviceFeeder> make_host_device_feeder(const c10::Device& device) {
  return std::make_unique<HostDeviceFeeder>(device);
}

}  // namespace scaffold::train
