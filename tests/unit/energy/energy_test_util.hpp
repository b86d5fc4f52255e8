// Shared by the energy tests: a comparison that reports value, reference, error and tolerance,
// and a scripted fake power source.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "energy/sensor.hpp"
#include "energy/trace.hpp"

namespace scaffold::energy::test {

// |got - want| <= tol, with the numbers in the failure message.
inline ::testing::AssertionResult close(const std::string& what, double got, double want,
                                        double tol) {
  const double err = std::fabs(got - want);
  if (err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": got " << got << ", want " << want
                                       << ", |error| " << err << " > tolerance " << tol;
}

// A source whose sensors follow given functions of the monotonic time; optionally failing.
class FakeSource : public PowerSource {
 public:
  struct Sensor {
    SensorInfo info;
    std::function<double(double t_s)> power_w;    // empty: no power reading
    std::function<double(double t_s)> counter_j;  // empty: no counter
  };
  FakeSource(std::string name, std::vector<Sensor> sensors)
      : name_(std::move(name)), sensors_(std::move(sensors)) {}
  std::string method() const override { return name_; }
  std::vector<SensorInfo> init() override {
    std::vector<SensorInfo> out;
    for (const auto& s : sensors_) out.push_back(s.info);
    return out;
  }
  void sample(std::vector<SensorReading>& out) override;
  void finalize() override { ++finalized; }

  std::atomic<int> samples{0};
  std::atomic<int> finalized{0};
  int nan_sensor = -1;              // this sensor reads NaN ...
  int nan_from_sample = 1 << 30;    // ... from this sample on
  int throw_from_sample = 1 << 30;  // the whole sample throws from this sample on
  // The clock time each sample was read at (the sampler serialises samples; read after stop()).
  std::vector<double> read_times_s;

 private:
  std::string name_;
  std::vector<Sensor> sensors_;
};

inline void FakeSource::sample(std::vector<SensorReading>& out) {
  const int k = samples++;
  if (k >= throw_from_sample) throw std::runtime_error("fake source unplugged");
  const double t = monotonic_now_s();
  read_times_s.push_back(t);
  for (std::size_t i = 0; i < sensors_.size(); ++i) {
    if (static_cast<int>(i) == nan_sensor && k >= nan_from_sample) continue;
    if (sensors_[i].power_w) out[i].power_w = sensors_[i].power_w(t);
    if (sensors_[i].counter_j) out[i].counter_j = sensors_[i].counter_j(t);
  }
}

}  // namespace scaffold::energy::test
