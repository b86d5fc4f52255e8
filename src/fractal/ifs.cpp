#include "fractal/ifs.hpp"

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

// Parses `rows` lines of `cols` comma-separated finite doubles.
std::vector<std::vector<double>> parse_numeric_csv(const std::string& text, const std::string& source,
                                                   std::size_t rows, std::size_t cols) {
  std::vector<std::vector<double>> table;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<double> row;
    const char* p = line.c_str();
    for (;;) {
      char* end = nullptr;
      const double v = std::strtod(p, &end);
      if (end == p || !std::isfinite(v))
        throw core::FileError(source, "row " + std::to_string(table.size() + 1) +
                                          ": expected finite numbers, got '" + line + "'");
      row.push_back(v);
      while (*end == ' ') ++end;
      if (*end == '\0') break;
      if (*end != ',')
        throw core::FileError(source, "row " + std::to_string(table.size() + 1) +
                                          ": expected ',' between numbers");
      p = end + 1;
    }
    if (row.size() != cols)
      throw core::FileError(source, "row " + std::to_string(table.size() + 1) + " has " +
                                        std::to_string(row.size()) + " values, expected " +
                                        std::to_string(cols));
    table.push_back(std::move(row));
  }
  if (table.size() != rows)
    throw core::FileError(source, "has " + std::to_string(table.size()) + " rows, expected " +
                                      std::to_string(rows));
  return table;
}

}  // namespace

IfsParams category_from_csv(const std::string& text, const std::string& source) {
  const auto table = parse_numeric_csv(text, source, kMaps, kParamsPerMap);
  IfsParams params;
  for (int t = 0; t < kMaps; ++t)
    for (int k = 0; k < kParamsPerMap; ++k) params.maps[t][k] = table[t][k];
  return params;
}

std::vector<InstanceWeights> parse_weight_table(const std::string& text, const std::string& source) {
  const auto table = parse_numeric_csv(text, source, kInstancesPerCategory, kAffineParams);
  std::vector<InstanceWeights> weights(table.size());
  for (std::size_t i = 0; i < table.size(); ++i)
    for (int k = 0; k < kAffineParams; ++k) weights[i][k] = table[i][k];
  return weights;
}

const std::vector<InstanceWeights>& instance_weight_table() {
  static const std::vector<InstanceWeights> table =
      parse_weight_table(kEmbeddedWeightTableCsv, "embedded weights_ins145.csv");
  return table;
}

}  // namespace scaffold::fractal
