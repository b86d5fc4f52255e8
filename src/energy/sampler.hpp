// PowerSampler: a background thread that samples every source on absolute deadlines of the
// monotonic clock (no drift, no jpwr-style paired samples), records a wall-clock stamp alongside,
// and answers energy/power queries over any window while it runs. Integration, totals and
// windows are PowerTrace's (trace.hpp); this file adds only the thread, marks and jitter.
//
// Typical use (the benchmark's phase windows):
//   auto opened = energy::open_sources({});              // sources.hpp; may be empty
//   energy::PowerSampler sampler(std::move(opened.sources));
//   sampler.start();
//   const double t0 = sampler.mark("train_start");       // takes a sample now
//   ...train...
//   const double t1 = sampler.mark("train_end");
//   double train_j = sampler.energy_between_j(t0, t1);   // total, each sensor counted once
//   sampler.stop();
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "energy/sensor.hpp"
#include "energy/trace.hpp"

namespace scaffold::energy {

struct SamplerOptions {
  double interval_s = 0.1;  // time between scheduled samples (jpwr's default 100 ms)
};

// How well the thread kept its schedule: lateness = wake-up time minus deadline.
struct JitterStats {
  std::size_t scheduled_samples = 0;  // samples taken on the schedule (not start/stop/marks)
  std::size_t missed_deadlines = 0;   // deadlines skipped because a sample ran past the next one
  double late_mean_s = 0.0;
  double late_p50_s = 0.0;
  double late_p99_s = 0.0;
  double late_max_s = 0.0;
};

// A named point in time (monotonic seconds) at which a sample was taken.
struct Mark {
  std::string name;
  double t_s = 0.0;
};

// Thread-safe: every const query may run while sampling. start()/stop() from one thread.
class PowerSampler {
 public:
  // Sources are already opened (open_sources or open_source); their sensors are concatenated
  // in order, names made unique and select_total applied. No sources is fine: the sampler
  // then records time stamps only, and every energy is NaN.
  explicit PowerSampler(std::vector<OpenSource> sources, SamplerOptions options = {});
  ~PowerSampler();  // stops if running (errors are logged, not thrown)
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  // Takes the first sample now and starts the thread. Once per sampler.
  void start();
  // Stops the thread, takes a last sample now and finalizes the sources. Idempotent.
  void stop();
  bool running() const;

  // Takes a sample now and records `name` at its time; returns that time (monotonic s), to pass
  // to energy_between_j. Before start() or after stop() it records the current time only.
  double mark(const std::string& name);
  std::vector<Mark> marks() const;
  std::optional<double> mark_time_s(const std::string& name) const;  // the last mark of that name

  // Sensors with their run-time state (failed, failed_reads, counter_reset, in_total).
  std::vector<SensorInfo> sensors() const;

  // Windows over the recorded trace: see PowerTrace for clipping and integration rules.
  double energy_between_j(double t0_s, double t1_s) const;                      // total
  double energy_between_j(std::size_t sensor, double t0_s, double t1_s) const;  // one sensor
  double average_power_w(std::size_t sensor, double t0_s, double t1_s) const;
  double peak_power_w(std::size_t sensor, double t0_s, double t1_s) const;
  WindowSummary window(double t0_s, double t1_s) const;
  // Between two marks; throws core::Error naming an unknown mark and the known ones.
  WindowSummary window(const std::string& from_mark, const std::string& to_mark) const;
  WindowSummary whole() const;  // first to last sample

  PowerTrace trace() const;  // a copy of everything recorded so far
  JitterStats jitter() const;
  const SamplerOptions& options() const { return options_; }

 private:
  void run();
  double take_sample();  // caller holds sample_mutex_; returns the sample's time

  SamplerOptions options_;
  std::vector<OpenSource> sources_;
  std::vector<std::size_t> first_sensor_;  // index of each source's first sensor
  std::vector<bool> source_warned_;
  std::vector<bool> sensor_warned_;
  std::vector<std::vector<SensorReading>> buffers_;  // one per source
  std::vector<SensorReading> readings_;              // all sensors of one sample

  std::mutex sample_mutex_;            // serialises reads of the sources and appends (time order)
  std::atomic<bool> sampling_{false};  // between start() and stop(); set under sample_mutex_
  mutable std::mutex data_mutex_;      // guards trace_, marks_, late_s_, missed_
  PowerTrace trace_;
  std::vector<Mark> marks_;
  std::vector<double> late_s_;
  std::size_t missed_ = 0;

  mutable std::mutex control_mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  bool started_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace scaffold::energy
