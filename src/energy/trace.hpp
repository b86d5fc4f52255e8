// The pure half of power measurement: a recorded trace of (monotonic time, readings) samples,
// integrated per sensor, with windows queried between any two monotonic times. No threads and
// no clock reads except monotonic_now_s()/wall_now_s(), so tests feed samples at chosen times.
// Not synchronised: PowerSampler guards its trace with a mutex.
#pragma once

#include <cstddef>
#include <vector>

#include "energy/sensor.hpp"

namespace scaffold::energy {

// Seconds on std::chrono::steady_clock (CLOCK_MONOTONIC): the time base of every trace, mark
// and window. Callers that want energy between two events take these stamps themselves.
double monotonic_now_s();
// Seconds since the Unix epoch on the wall clock, recorded alongside for people and plots.
double wall_now_s();

// Turns raw readings of a hardware energy counter into energy since the first reading.
// A reading below the previous one is a wrap when the range is known (RAPL's
// max_energy_range_uj: delta = range - previous + current); with no range it is a reset (driver
// reload), after which the counter is invalid for the rest of the trace. At most one wrap
// between two readings can be seen: RAPL's ~262 kJ range lasts minutes even at 1 kW.
class CounterTracker {
 public:
  explicit CounterTracker(double range_j = 0.0) : range_j_(range_j) {}
  // Feeds one raw reading (J). NaN (a failed read) is ignored. Returns energy_j().
  double update(double raw_j);
  // Energy since the first reading (J); NaN before any reading or once invalid.
  double energy_j() const;
  bool valid() const { return valid_; }
  int wraps() const { return wraps_; }

 private:
  double range_j_;
  double first_ = kNaN;
  double previous_ = kNaN;
  double accumulated_j_ = 0.0;
  bool valid_ = true;
  int wraps_ = 0;
};

// One sensor over a window [t0, t1].
struct SensorWindow {
  double integrated_j = kNaN;  // ∫ power dt (trapezoid; linear interpolation at the edges)
  double counter_j = kNaN;     // counter difference (interpolated at the edges); NaN: no counter
  double energy_j = kNaN;      // counter_j when there is one, else integrated_j
  double average_w = kNaN;     // integrated_j / covered_s
  double peak_w = kNaN;        // highest power of the interpolated curve inside the window
  double covered_s = 0.0;      // part of the window inside this sensor's recorded span
  std::size_t samples = 0;     // power samples strictly inside the window
};

// Every sensor over a window, and the total over the sensors marked in_total.
struct WindowSummary {
  double t0_s = 0.0, t1_s = 0.0;      // the window as asked (monotonic seconds)
  std::vector<SensorWindow> sensors;  // in sensors() order
  int total_sensors = 0;              // sensors summed (in_total)
  double total_integrated_j = kNaN;   // Σ integrated_j over in_total sensors with data
  double total_counter_j = kNaN;      // Σ counter_j when every in_total sensor has a valid one
  double total_j = kNaN;              // total_counter_j if available, else total_integrated_j
  bool total_from_counter = false;
};

// A recorded power trace. Integration per sensor:
//   - sampled power: trapezoid between consecutive valid samples; a failed read is skipped,
//     so the gap is bridged by the straight line between its neighbours;
//   - power_from_counter sensors (RAPL): power is the mean over the preceding interval, a
//     step function whose integral is exactly the counter difference.
// Windows are clipped to each sensor's recorded span (first to last valid sample): the sampler
// takes a sample at start, stop and every mark, so spans cover what was measured. A window
// with no overlap gives NaN energies.
class PowerTrace {
 public:
  PowerTrace() = default;
  explicit PowerTrace(std::vector<SensorInfo> sensors);

  // Appends one sample. `readings` has one entry per sensor; t_s must not decrease.
  void add(double t_s, double wall_s, const std::vector<SensorReading>& readings);

  // Sensors with their run-time state (failed, failed_reads, counter_reset).
  const std::vector<SensorInfo>& sensors() const { return sensors_; }
  std::size_t size() const { return t_s_.size(); }
  bool empty() const { return t_s_.empty(); }
  double t_s(std::size_t sample) const { return t_s_[sample]; }
  double wall_s(std::size_t sample) const { return wall_s_[sample]; }
  // The power as recorded (derived for power_from_counter sensors); NaN when not read.
  double power_w(std::size_t sample, std::size_t sensor) const;
  double first_t_s() const;  // NaN when empty
  double last_t_s() const;

  SensorWindow sensor_window(std::size_t sensor, double t0_s, double t1_s) const;
  WindowSummary window(double t0_s, double t1_s) const;
  WindowSummary whole() const { return window(first_t_s(), last_t_s()); }
  // Total energy (J) between two monotonic times: counter-based when every summed sensor has a
  // valid counter, else integrated. NaN when nothing is summed or nothing overlaps.
  double energy_between_j(double t0_s, double t1_s) const;
  // One sensor's energy (J): its counter when it has one, else integrated.
  double energy_between_j(std::size_t sensor, double t0_s, double t1_s) const;
  double average_power_w(std::size_t sensor, double t0_s, double t1_s) const;
  double peak_power_w(std::size_t sensor, double t0_s, double t1_s) const;

 private:
  // One sensor's valid points. For power_from_counter sensors the first point has NaN power
  // (no interval before it) and power_w[k] is the mean over (t[k-1], t[k]].
  struct Series {
    std::vector<double> t_s, power_w, cum_j;     // power points, ∫ from the first point
    std::vector<double> counter_t_s, counter_j;  // counter points, energy since the first
    CounterTracker counter;
  };
  double integral_at(const Series& s, bool step, double t) const;
  static double interpolate(const std::vector<double>& t, const std::vector<double>& v, double x);

  std::vector<SensorInfo> sensors_;
  std::vector<Series> series_;
  std::vector<double> t_s_, wall_s_;
  std::vector<double> power_rows_;  // (samples, sensors), row-major
};

}  // namespace scaffold::energy
