// Energy measured over the same windows as the benchmark's timings (warm-up, each epoch's
// training and validation): one power sampler per node (the lowest rank of each node), window
// energies summed over nodes once at the end, energy_stats.csv written by rank 0. The phases of a
// run (data, model set-up, ...) are measured too and go to energy_phases.csv. Without any power
// source it says so once and measures nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "energy/sampler.hpp"
#include "report/energy_stats.hpp"

namespace scaffold::energy {

class EnergyMeter {
 public:
  // Collective: every rank learns whether any node has a power source.
  explicit EnergyMeter(dist::Communicator& comm);
  ~EnergyMeter();
  bool active() const { return any_node_measures_; }

  // Records a window [t0_s, t1_s] on the steady clock (core::monotonic_s).
  void add_window(const std::string& name, int64_t epoch, double t0_s, double t1_s);
  // Records a phase of the run (suite::PhaseDriver), written to energy_phases.csv.
  void add_phase(const std::string& name, double t0_s, double t1_s);

  // Collective: reduces every window over nodes; rank 0 writes <run_dir>/energy_stats.csv (and
  // energy_phases.csv when phases were recorded), keeping
  // the rows of epochs before `first_epoch` from an earlier part of a restarted run. Returns all
  // rows (rank 0; empty elsewhere and when inactive).
  std::vector<report::EnergyWindowRecord> finish(const std::filesystem::path& run_dir,
                                                 int64_t first_epoch);

 private:
  struct Window {
    std::string name;
    int64_t epoch;
    double t0_s, t1_s;
    bool phase = false;  // a phase of the run rather than a training window
  };
  dist::Communicator& comm_;
  std::unique_ptr<energy::PowerSampler> sampler_;  // this node's, on its lowest rank only
  bool any_node_measures_ = false;
  double origin_s_ = 0.0;  // start_s in the CSV counts from here
  std::vector<Window> windows_;
};

}  // namespace scaffold::energy
