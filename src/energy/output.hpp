// The files and the table of a power measurement: power.csv (one row per sample), energy.csv
// (one row per sensor plus the total) and a short summary table for the console. Values are
// written like Python's str() (core::python_float_str); a missing value is an empty field.
#pragma once

#include <filesystem>
#include <string>

#include "energy/trace.hpp"

namespace scaffold::energy {

// Header: time_s (monotonic, from the first sample), unix_time_s (wall clock), then
// "<sensor> [W]" per sensor. Times rounded to the microsecond.
std::string power_csv(const PowerTrace& trace);

// Header: sensor,method,kind,summed,samples,failed_reads,duration_s,power_avg_w,power_peak_w,
// energy_integrated_j,energy_integrated_wh,energy_counter_j,energy_counter_wh,energy_j,energy_wh,
// energy_from — then one row per sensor over `window`, and a last row "total" (the sensors with
// summed=True; energy_from says whether the total is counter-based or integrated).
std::string energy_csv(const PowerTrace& trace, const WindowSummary& window);

// A few aligned lines: one per sensor (kind, summed, avg/peak W, Wh, integrated and counter J,
// failures) and the total.
std::string summary_table(const PowerTrace& trace, const WindowSummary& window);

// Writes <dir>/power.csv and <dir>/energy.csv (whole trace) atomically, creating `dir`.
void write_power_files(const std::filesystem::path& dir, const PowerTrace& trace);

}  // namespace scaffold::energy
