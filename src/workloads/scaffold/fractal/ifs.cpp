#include "workloads/scaffold/fractal/ifs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::fractal {

extern const char* const kEmbeddedWeightTableCsv;  // generated from data/weights_ins145.csv

uint64_t candidate_params_key(uint64_t seed, uint64_t attempt) {
  return core::stream_key({seed, static_cast<uint64_t>(Stream::CandidateParams), attempt});
}
uint64_t candidate_points_key(uint64_t seed, uint64_t attempt) {
  return core::stream_key({seed, static_cast<uint64_t>(Stream::CandidatePoints), attempt});
}
uint64_t instance_points_key(uint64_t seed, uint64_t category, uint64_t instance) {
  return core::stream_key(
      {seed, static_cast<uint64_t>(Stream::InstancePoints), category, instance});
}

double map_determinant(const std::array<double, kParamsPerMap>& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

void set_probabilities(IfsParams& params) {
  const double d0 = std::fabs(map_determinant(params.maps[0]));
  const double d1 = std::fabs(map_determinant(params.maps[1]));
  const double sum = d0 + d1;
  params.maps[0][kProbabilityColumn] = d0 / sum;  // 0/0 = NaN: rejected as an invalid value
  params.maps[1][kProbabilityColumn] = d1 / sum;
}

IfsParams sample_candidate(uint64_t seed, uint64_t attempt) {
  core::Xoshiro256p rng(candidate_params_key(seed, attempt));
  IfsParams params;
  for (auto& map : params.maps)
    for (double& v : map) v = rng.uniform(-1.0, 1.0);
  set_probabilities(params);
  return params;
}

IfsParams apply_weights(const IfsParams& base, const InstanceWeights& weights) {
  IfsParams out = base;
  for (auto& map : out.maps)
    for (int k = 0; k < kAffineParams; ++k) map[k] *= weights[k];
  return out;
}

InstanceWeights attenuate(const InstanceWeights& weights, double factor) {
  InstanceWeights out;
  for (int k = 0; k < kAffineParams; ++k) out[k] = 1.0 + (weights[k] - 1.0) * factor;
  return out;
}

std::string category_to_csv(const IfsParams& params) {
  std::string text;
  char buf[40];
  for (const auto& map : params.maps) {
    for (int k = 0; k < kParamsPerMap; ++k) {
      std::snprintf(buf, sizeof buf, "%.18e", map[k]);
      text += buf;
      text += k + 1 < kParamsPerMap ? ',' : '\n';
    }
  }
  return text;
}

namespace {

// A parsed table row and the file line it came from (1-based, blank lines counted).
struct CsvRow {
  int line = 0;
  std::vector<double> values;
};

// Parses `rows` non-blank lines of `cols` comma-separated finite doubles; errors name the line.
std::vector<CsvRow> parse_numeric_csv(const std::string& text, const std::string& source,
                                      std::size_t rows, std::size_t cols) {
  std::vector<CsvRow> table;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(number);
    CsvRow row;
    row.line = number;
    const char* p = line.c_str();
    for (;;) {
      char* end = nullptr;
      const double v = std::strtod(p, &end);
      if (end == p || !std::isfinite(v))
        throw core::FileError(source,
                              fmt::format("{}, value {}: expected a finite number, got '{}'", where,
                                          row.values.size() + 1, line));
      row.values.push_back(v);
      while (*end == ' ') ++end;
      if (*end == '\0') break;
      if (*end != ',')
        throw core::FileError(source,
                              fmt::format("{}: expected ',' between numbers in '{}'", where, line));
      p = end + 1;
    }
    if (row.values.size() != cols)
      throw core::FileError(source, where + " has " + std::to_string(row.values.size()) +
                                        " values, expected " + std::to_string(cols));
    table.push_back(std::move(row));
  }
  if (table.size() != rows)
    throw core::FileError(
        source, "has " + std::to_string(table.size()) + " rows, expected " + std::to_string(rows));
  return table;
}

}  // namespace

IfsParams category_from_csv(const std::string& text, const std::string& source) {
  const auto table = parse_numeric_csv(text, source, kMaps, kParamsPerMap);
  IfsParams params;
  for (int t = 0; t < kMaps; ++t)
    for (int k = 0; k < kParamsPerMap; ++k) params.maps[t][k] = table[t].values[k];
  // Column 13 is the chance of picking each map: a distribution, or the chaos game would
  // silently run one map only (a negative value) or pick past the end (a sum above one).
  double sum = 0.0;
  for (int t = 0; t < kMaps; ++t) {
    const double p = params.maps[t][kProbabilityColumn];
    if (p < 0.0 || p > 1.0) {
      char value[40];
      std::snprintf(value, sizeof value, "%.17g", p);
      throw core::FileError(source, "line " + std::to_string(table[t].line) +
                                        ", value 13 (the probability of map " + std::to_string(t) +
                                        "): " + value + " is outside [0, 1]");
    }
    sum += p;
  }
  if (std::fabs(sum - 1.0) > kProbabilitySumTolerance) {
    char value[40];
    std::snprintf(value, sizeof value, "%.17g", sum);
    throw core::FileError(
        source, "lines " + std::to_string(table[0].line) + " and " + std::to_string(table[1].line) +
                    ", value 13: the map probabilities sum to " + value + ", not 1");
  }
  return params;
}

std::vector<InstanceWeights> parse_weight_table(const std::string& text,
                                                const std::string& source) {
  const auto table = parse_numeric_csv(text, source, kInstancesPerCategory, kAffineParams);
  std::vector<InstanceWeights> weights(table.size());
  for (std::size_t i = 0; i < table.size(); ++i)
    for (int k = 0; k < kAffineParams; ++k) weights[i][k] = table[i].values[k];
  return weights;
}

const std::vector<InstanceWeights>& instance_weight_table() {
  static const std::vector<InstanceWeights> table =
      parse_weight_table(kEmbeddedWeightTableCsv, "embedded weights_ins145.csv");
  return table;
}

}  // namespace scaffold::fractal
