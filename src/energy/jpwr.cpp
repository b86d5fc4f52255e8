// jpwr's file names, tables and CSV files (the HDF5 files are in jpwr_h5.cpp).
#include "energy/jpwr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::energy::jpwr {

namespace {

using core::csv_field;
std::string num(double v) {
  return core::python_float_str_or_empty(v);
}

void make_unique(std::vector<std::string>& names) {
  std::map<std::string, int> seen;
  for (auto& n : names) {
    const int k = ++seen[n];
    if (k > 1) n += " #" + std::to_string(k);
  }
}

}  // namespace

std::string expand_suffix(const std::string& text, const EnvLookup& env) {
  std::string out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t open = text.find("%q{", pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    out += text.substr(pos, open - pos);
    const std::size_t close = text.find('}', open + 3);
    if (close == std::string::npos)
      throw core::UsageError(fmt::format(
          "--df-suffix '{}': '%q{{' without a closing '}}' (expected %q{{NAME}}, NAME an "
          "environment variable)",
          text));
    const std::string name = text.substr(open + 3, close - open - 3);
    if (name.empty())
      throw core::UsageError(
          fmt::format("--df-suffix '{}': %q{{}} names no variable (expected %q{{NAME}}, e.g. "
                      "%q{{SLURM_PROCID}})",
                      text));
    const char* value = env(name.c_str());
    if (value == nullptr)
      throw core::UsageError(
          fmt::format("--df-suffix '{}': the environment variable {} is not set (jpwr would write "
                      "'None' into the file names)",
                      text, name));
    out += value;
    pos = close + 1;
  }
  if (out.find('/') != std::string::npos || out.find('\0') != std::string::npos)
    throw core::UsageError(fmt::format(
        "--df-suffix '{}' expands to '{}', which holds a '/' (it becomes part of a file name)",
        text, out));
  return out;
}

std::string file_suffix(const SuffixParts& parts) {
  std::string host_pid = parts.host + "." + std::to_string(parts.pid);
  if (parts.suffix) return *parts.suffix + "." + host_pid;
  if (parts.use_mpi) return std::to_string(parts.rank);
  return host_pid;
}

const char* extension(FileType type) {
  return type == FileType::H5 ? "h5" : "csv";
}

Tables make_tables(const PowerTrace& trace) {
  const auto& sensors = trace.sensors();
  std::vector<std::string> names;
  names.reserve(sensors.size());
  for (const auto& s : sensors) names.push_back(s.jpwr_name.empty() ? s.name : s.jpwr_name);
  make_unique(names);

  Tables out;
  Frame& power = out.power;
  power.columns.push_back("timestamps");
  power.columns.insert(power.columns.end(), names.begin(), names.end());
  power.rows = trace.size();
  power.values.reserve(power.rows * power.columns.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    power.values.push_back(trace.wall_s(i));
    for (std::size_t j = 0; j < sensors.size(); ++j) power.values.push_back(trace.power_w(i, j));
  }

  const WindowSummary whole = trace.empty() ? WindowSummary{} : trace.whole();
  Frame counters;
  for (std::size_t j = 0; j < sensors.size(); ++j) {
    const double integrated_j = trace.empty() ? kNaN : whole.sensors[j].integrated_j;
    out.energy.index.push_back(names[j]);
    out.energy.values.push_back(wh_from_j(integrated_j));
    const double counter_j = trace.empty() ? kNaN : whole.sensors[j].counter_j;
    if (sensors[j].has_counter && !std::isnan(counter_j)) {
      counters.columns.push_back(names[j]);
      counters.values.push_back(wh_from_j(counter_j));
    }
  }
  if (!counters.columns.empty()) {
    counters.rows = 1;
    out.energy_from_counter = std::move(counters);
  }
  return out;
}

std::string frame_csv(const Frame& frame) {
  std::string out;
  for (const auto& c : frame.columns) out += "," + csv_field(c);
  out += '\n';
  const std::size_t width = frame.columns.size();
  for (std::size_t i = 0; i < frame.rows; ++i) {
    out += std::to_string(i);
    for (std::size_t j = 0; j < width; ++j) out += "," + num(frame.values[i * width + j]);
    out += '\n';
  }
  return out;
}

std::string series_csv(const Series& series) {
  std::string out = ",0\n";
  for (std::size_t i = 0; i < series.index.size(); ++i)
    out += csv_field(series.index[i]) + "," + num(series.values[i]) + "\n";
  return out;
}

std::string series_text(const Series& series) {
  // Six decimals, then the trailing zeros every number has cut, down to one decimal (pandas'
  // float format; its switch to exponents for tiny or huge values is not reproduced).
  std::vector<std::string> values;
  for (double v : series.values) values.push_back(std::isnan(v) ? "NaN" : fmt::format("{:.6f}", v));
  for (int decimals = 6; decimals > 1; --decimals) {
    bool all_zero = true;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isnan(series.values[i]) && values[i].back() != '0') all_zero = false;
    if (!all_zero) break;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isnan(series.values[i])) values[i].pop_back();
  }
  std::size_t index_width = 0, value_width = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    index_width = std::max(index_width, series.index[i].size());
    value_width = std::max(value_width, values[i].size());
  }
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += fmt::format("{:<{}}    {:>{}}\n", series.index[i], index_width, values[i], value_width);
  return out + "dtype: float64\n";
}

std::vector<std::filesystem::path> write_files(const std::filesystem::path& dir,
                                               const std::string& suffix, FileType type,
                                               const Tables& tables) {
  core::create_directories(dir);
  std::vector<std::filesystem::path> written;
  const auto path = [&](const char* table) {
    return dir / (std::string(table) + "." + suffix + "." + extension(type));
  };
  const auto frame = [&](const char* table, const Frame& f) {
    written.push_back(path(table));
    core::write_file_atomic(written.back(), type == FileType::H5 ? frame_h5(f) : frame_csv(f));
  };
  frame("power", tables.power);
  written.push_back(path("energy"));
  core::write_file_atomic(
      written.back(), type == FileType::H5 ? series_h5(tables.energy) : series_csv(tables.energy));
  if (tables.energy_from_counter) frame("energy_from_counter", *tables.energy_from_counter);
  return written;
}

}  // namespace scaffold::energy::jpwr
