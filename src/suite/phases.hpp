// The phase driver (docs/architecture.md; HPCG's main, MLPerf's INIT_START ... RUN_STOP): a run is
// a sequence of named phases — init, data, model, warm-up, timed training, report — and each gets
// exactly one wall-clock timer, one profile region and one energy window (energy_phases.csv).
// The timed training phase's own per-epoch windows stay the workload's (energy_stats.csv).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/timer.hpp"
#include "energy/meter.hpp"
#include "profile/profiler.hpp"

namespace scaffold::suite {

struct PhaseTime {
  std::string name;
  double seconds = 0.0;
  double start_mono_s = 0.0;  // core::monotonic_s
  double end_mono_s = 0.0;
};

class PhaseDriver {
 public:
  explicit PhaseDriver(profile::Profiler* profiler = nullptr) : profiler_(profiler) {}

  // Phases that end after the meter exists are also measured; earlier ones are timed only.
  void set_energy_meter(energy::EnergyMeter* meter) { energy_ = meter; }

  // Runs body() as phase `name` and returns what it returns. `name` must be a string literal:
  // the profiler keeps the pointer.
  template <class F>
  decltype(auto) run(const char* name, F&& body) {
    Scope scope(*this, name);
    return std::forward<F>(body)();
  }

  const std::vector<PhaseTime>& phases() const { return phases_; }
  // The seconds of phase `name`; 0 when it did not run.
  double seconds(const std::string& name) const;
  // "data 1.20 s, model 0.31 s, ..." in run order.
  std::string summary() const;

 private:
  struct Scope {
    Scope(PhaseDriver& d, const char* name);
    ~Scope();
    PhaseDriver& driver;
    std::string name;
    profile::ScopedRegion region;
    double start_mono_s;
  };
  profile::Profiler* profiler_;
  energy::EnergyMeter* energy_ = nullptr;
  std::vector<PhaseTime> phases_;
};

}  // namespace scaffold::suite
