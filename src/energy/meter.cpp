#include "energy/meter.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "energy/sources.hpp"

namespace scaffold::energy {
namespace fs = std::filesystem;

EnergyMeter::EnergyMeter(dist::Communicator& comm) : comm_(comm), origin_s_(core::monotonic_s()) {
  std::string found;
  if (comm_.local_rank() == 0) {
    try {
      // SCAFFOLD_HWMON_ROOT / SCAFFOLD_POWERCAP_ROOT point the sysfs readers elsewhere: for sysfs
      // mounted at another path (containers) and for the end-to-end tests' fixture trees.
      energy::SourceOptions options;
      if (const char* root = std::getenv("SCAFFOLD_HWMON_ROOT")) options.hwmon.root = root;
      if (const char* root = std::getenv("SCAFFOLD_POWERCAP_ROOT")) options.powercap.root = root;
      // SCAFFOLD_POWER_METHODS (a system's power_methods in jube/systems.yaml) names the methods,
      // as `scaffold power --methods` does; unset or empty: auto.
      if (const char* methods = std::getenv("SCAFFOLD_POWER_METHODS"); methods && *methods) {
        try {
          options.methods = energy::parse_methods(methods);
        } catch (const std::exception& e) {
          throw core::Error(fmt::format("SCAFFOLD_POWER_METHODS='{}': {}", methods, e.what()));
        }
      }
      energy::OpenedSources opened = energy::open_sources(options);
      if (!opened.sources.empty()) {
        sampler_ = std::make_unique<energy::PowerSampler>(std::move(opened.sources));
        for (const auto& s : sampler_->sensors())
          found += (found.empty() ? "" : ", ") + s.name + (s.in_total ? "" : " (not summed)");
        sampler_->start();
      }
    } catch (const std::exception& e) {
      LOG_WARN("energy: power sources could not be opened on this node: {}", e.what());
      sampler_.reset();
    }
  }
  int64_t measuring = sampler_ ? 1 : 0;
  comm_.allreduce_sum(&measuring, 1);
  any_node_measures_ = measuring > 0;
  if (!any_node_measures_)
    LOG_INFO(
        "energy: no power source found (NVML, ROCm SMI, hwmon, powercap): energy is not measured");
  else
    // The origin lets the windows be laid beside other records on the steady clock (a power
    // trace, the tests' time-varying fixture): start_s + origin = steady-clock seconds.
    LOG_INFO(
        "energy: sampling every 100 ms on {} of {} node(s); sensors here: {}; start_s counts from "
        "steady-clock time {:.6f} s",
        measuring, comm_.nodes(), found.empty() ? "none" : found, origin_s_);
}

EnergyMeter::~EnergyMeter() {
  if (sampler_ && sampler_->running()) sampler_->stop();
}

void EnergyMeter::add_window(const std::string& name, int64_t epoch, double t0_s, double t1_s) {
  windows_.push_back({name, epoch, t0_s, t1_s, false});
}

void EnergyMeter::add_phase(const std::string& name, double t0_s, double t1_s) {
  windows_.push_back({name, 0, t0_s, t1_s, true});
}

std::vector<report::EnergyWindowRecord> EnergyMeter::finish(const fs::path& run_dir,
                                                            int64_t first_epoch) {
  if (!any_node_measures_) return {};
  if (sampler_) sampler_->stop();
  // Per window: energy (J), peak power (W), samples, and whether this node measured it; summed over
  // nodes in one collective. Each node's sensors are counted once (the sampler's totals).
  const std::size_t fields = 4;
  std::vector<double> sums(windows_.size() * fields, 0.0);
  for (std::size_t w = 0; w < windows_.size() && sampler_; ++w) {
    const energy::WindowSummary s = sampler_->window(windows_[w].t0_s, windows_[w].t1_s);
    double peak = 0.0, samples = 0.0;
    for (const auto& sensor : s.sensors)
      samples = std::max(samples, static_cast<double>(sensor.samples));
    for (std::size_t i = 0; i < s.sensors.size(); ++i)
      if (sampler_->sensors()[i].in_total && std::isfinite(s.sensors[i].peak_w))
        peak += s.sensors[i].peak_w;
    sums[w * fields + 0] = std::isfinite(s.total_j) ? s.total_j : 0.0;
    sums[w * fields + 1] = peak;
    sums[w * fields + 2] = samples;
    sums[w * fields + 3] = std::isfinite(s.total_j) ? 1.0 : 0.0;
  }
  comm_.allreduce_sum(sums.data(), sums.size());
  if (comm_.rank() != 0) return {};

  std::vector<report::EnergyWindowRecord> rows, phases;
  const fs::path file = run_dir / report::kEnergyStatsFileName;
  std::error_code ec;
  if (first_epoch > 1 && fs::exists(file, ec))
    for (const auto& r : report::read_energy_stats(file))
      if (r.epoch > 0 && r.epoch < first_epoch) rows.push_back(r);
  for (std::size_t w = 0; w < windows_.size(); ++w) {
    if (sums[w * fields + 3] == 0.0) continue;  // no node had samples in this window
    report::EnergyWindowRecord r;
    r.window = windows_[w].name;
    r.epoch = windows_[w].epoch;
    r.start_s = windows_[w].t0_s - origin_s_;
    r.duration_s = windows_[w].t1_s - windows_[w].t0_s;
    r.energy_j = sums[w * fields + 0];
    r.energy_wh = r.energy_j / 3600.0;
    r.avg_power_w = r.duration_s > 0 ? r.energy_j / r.duration_s : 0.0;
    r.peak_power_w = sums[w * fields + 1];
    r.samples = static_cast<int64_t>(sums[w * fields + 2]);
    (windows_[w].phase ? phases : rows).push_back(r);
  }
  report::write_energy_stats(run_dir, rows);
  if (!phases.empty()) report::write_energy_phases(run_dir, phases);
  return rows;
}

}  // namespace scaffold::energy
