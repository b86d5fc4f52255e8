// power.csv, energy.csv and the summary table.
#include "energy/output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/fs.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::energy {

namespace {

using core::csv_field;
std::string num(double v) {
  return core::python_float_str_or_empty(v);
}
std::string num_us(double v) {
  return std::isnan(v) ? std::string() : core::python_float_str(std::round(v * 1e6) / 1e6);
}
const char* py_bool(bool b) {
  return b ? "True" : "False";
}

std::string fixed(double v, int decimals) {
  return std::isnan(v) ? std::string("-") : fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::string power_csv(const PowerTrace& trace) {
  const auto& sensors = trace.sensors();
  std::string out = "time_s,unix_time_s";
  for (const auto& s : sensors) out += "," + csv_field(s.name + " [" + s.unit + "]");
  out += '\n';
  const double t0 = trace.first_t_s();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    out += num_us(trace.t_s(i) - t0) + "," + num_us(trace.wall_s(i));
    for (std::size_t j = 0; j < sensors.size(); ++j) out += "," + num(trace.power_w(i, j));
    out += '\n';
  }
  return out;
}

std::string energy_csv(const PowerTrace& trace, const WindowSummary& window) {
  const auto& sensors = trace.sensors();
  std::string out =
      "sensor,method,kind,summed,samples,failed_reads,duration_s,power_avg_w,power_peak_w,"
      "energy_integrated_j,energy_integrated_wh,energy_counter_j,energy_counter_wh,energy_j,energy_"
      "wh,"
      "energy_from\n";
  for (std::size_t i = 0; i < sensors.size(); ++i) {
    const SensorInfo& s = sensors[i];
    const SensorWindow& w = window.sensors[i];
    const char* from =
        std::isnan(w.energy_j) ? "" : (std::isnan(w.counter_j) ? "integrated" : "counter");
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(s.name),
                    s.source, sensor_kind_name(s.kind), py_bool(s.in_total), w.samples,
                    s.failed_reads, num_us(w.covered_s), num(w.average_w), num(w.peak_w),
                    num(w.integrated_j), num(wh_from_j(w.integrated_j)), num(w.counter_j),
                    num(wh_from_j(w.counter_j)), num(w.energy_j), num(wh_from_j(w.energy_j)), from);
  }
  const double duration_s = window.t1_s - window.t0_s;
  const char* from =
      std::isnan(window.total_j) ? "" : (window.total_from_counter ? "counter" : "integrated");
  out += fmt::format("total,,,,,,{},{},,{},{},{},{},{},{},{}\n", num_us(duration_s),
                     num(duration_s > 0 ? window.total_j / duration_s : kNaN),
                     num(window.total_integrated_j), num(wh_from_j(window.total_integrated_j)),
                     num(window.total_counter_j), num(wh_from_j(window.total_counter_j)),
                     num(window.total_j), num(wh_from_j(window.total_j)), from);
  return out;
}

std::string summary_table(const PowerTrace& trace, const WindowSummary& window) {
  const auto& sensors = trace.sensors();
  std::size_t width = 6;
  for (const auto& s : sensors) width = std::max(width, s.name.size());
  std::string out =
      fmt::format("{:<{}}  {:<11}  {:<6}  {:>9}  {:>9}  {:>11}  {:>12}  {:>12}\n", "sensor", width,
                  "kind", "summed", "avg W", "peak W", "energy Wh", "integrated J", "counter J");
  for (std::size_t i = 0; i < sensors.size(); ++i) {
    const SensorInfo& s = sensors[i];
    const SensorWindow& w = window.sensors[i];
    out += fmt::format("{:<{}}  {:<11}  {:<6}  {:>9}  {:>9}  {:>11}  {:>12}  {:>12}", s.name, width,
                       sensor_kind_name(s.kind), s.in_total ? "yes" : "no", fixed(w.average_w, 2),
                       fixed(w.peak_w, 2), fixed(wh_from_j(w.energy_j), 6),
                       fixed(w.integrated_j, 3), fixed(w.counter_j, 3));
    if (s.failed) out += fmt::format("  FAILED ({} reads)", s.failed_reads);
    if (s.counter_reset) out += "  counter reset";
    out += '\n';
  }
  if (window.total_sensors == 0) {
    out += "total: no sensor is summed (none found, or only parts and sensors of unknown scope)\n";
  } else {
    out += fmt::format("total over {} sensor{} ({}): {} Wh = {} J\n", window.total_sensors,
                       window.total_sensors == 1 ? "" : "s",
                       window.total_from_counter ? "counters" : "integrated",
                       fixed(wh_from_j(window.total_j), 6), fixed(window.total_j, 3));
  }
  return out;
}

void write_power_files(const std::filesystem::path& dir, const PowerTrace& trace) {
  core::create_directories(dir);
  core::write_file_atomic(dir / "power.csv", power_csv(trace));
  core::write_file_atomic(dir / "energy.csv", energy_csv(trace, trace.whole()));
}

}  // namespace scaffold::energy
