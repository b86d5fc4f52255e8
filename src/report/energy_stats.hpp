// energy_stats.csv and energy_phases.csv (docs/energy.md): the energy of each measurement window
// of a run, written by rank 0 when the run ends (energy::EnergyMeter) and read by `scaffold
// report` and by a resumed run. Each file's columns are declared once (report/step_csv.hpp), so
// the writer and the reader cannot drift apart; the reader is strict (header, columns, ranges,
// window names) and names the file, line and column of what it rejects.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::report {

inline constexpr const char* kEnergyStatsFileName = "energy_stats.csv";
inline constexpr const char* kEnergyPhasesFileName = "energy_phases.csv";

// One measurement window. Energies and powers are totals over all measured sensors and nodes.
struct EnergyWindowRecord {
  // energy_stats.csv: "warmup" (epoch 0), "train" or "validation" (epoch 1..E);
  // energy_phases.csv: the phase's name (no epoch column there).
  std::string window;
  int64_t epoch = 0;
  double start_s = 0.0;  // window start, seconds since the sampler started
  double duration_s = 0.0;
  double energy_j = 0.0;
  double energy_wh = 0.0;
  double avg_power_w = 0.0;
  double peak_power_w = 0.0;
  int64_t samples = 0;  // power readings in the window
};

// The header line without its newline:
// window,epoch,start_s,duration_s,energy_j,energy_wh,avg_power_w,peak_power_w,samples
std::string energy_stats_header();
// phase,start_s,duration_s,energy_j,energy_wh,avg_power_w,peak_power_w,samples
std::string energy_phases_header();

// Writes <run_dir>/energy_stats.csv (the epochs' windows) or <run_dir>/energy_phases.csv (the
// run's phases) atomically: the header, then one line per row, numbers as Python's str() writes
// floats. Throws core::FileError.
void write_energy_stats(const std::filesystem::path& run_dir,
                        const std::vector<EnergyWindowRecord>& rows);
void write_energy_phases(const std::filesystem::path& run_dir,
                         const std::vector<EnergyWindowRecord>& phases);

// Parses an energy_stats.csv / energy_phases.csv. A different header, a row with other columns, a
// cell that is not its column's kind of number, or (energy_stats.csv) a window other than warmup,
// train or validation is a core::FileError naming the file and line.
std::vector<EnergyWindowRecord> read_energy_stats(const std::filesystem::path& path);
std::vector<EnergyWindowRecord> read_energy_phases(const std::filesystem::path& path);

}  // namespace scaffold::report
