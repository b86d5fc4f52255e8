// IFS categories (docs/fractals.md): exactly 2 affine maps in 3-D, 13 float64 numbers each:
// a..i (3x3 matrix, row-major), j,k,l (translation), p (selection probability).
// Also the instance weight table (docs/fractals.md, 'Instances') and the CSV form of a category.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::fractal {

constexpr int kMaps = 2;
constexpr int kParamsPerMap = 13;
constexpr int kAffineParams = 12;  // columns 0..11: matrix + translation (weights apply to these)
constexpr int kProbabilityColumn = 12;
constexpr int kInstancesPerCategory = 145;
// set_probabilities' two quotients sum to 1 within a few ulps; "%.18e" keeps every bit.
constexpr double kProbabilitySumTolerance = 1e-9;

struct IfsParams {
  std::array<std::array<double, kParamsPerMap>, kMaps> maps{};  // (2, 13)
  bool operator==(const IfsParams& other) const { return maps == other.maps; }
};

using InstanceWeights = std::array<double, kAffineParams>;

// Random-stream ids: each stream is keyed by (seed, stream id, ...) and nothing else.
enum class Stream : uint64_t { CandidateParams = 1, CandidatePoints = 2, InstancePoints = 3 };

uint64_t candidate_params_key(uint64_t seed, uint64_t attempt);
uint64_t candidate_points_key(uint64_t seed, uint64_t attempt);
uint64_t instance_points_key(uint64_t seed, uint64_t category, uint64_t instance);

// Determinant of the 3x3 matrix in columns 0..8 of one map.
double map_determinant(const std::array<double, kParamsPerMap>& map);

// Overwrites column 12 with |det(M_t)| / (|det(M_0)| + |det(M_1)|); NaN when both are 0.
void set_probabilities(IfsParams& params);

// The candidate of one search attempt: 26 numbers ~ U(-1, 1), then set_probabilities.
IfsParams sample_candidate(uint64_t seed, uint64_t attempt);

// params[:, 0:12] *= weights, the probabilities kept as they are (docs/fractals.md, 'Instances').
IfsParams apply_weights(const IfsParams& base, const InstanceWeights& weights);

// Attenuated weights 1 + (w - 1) * factor (factor 1 gives w, 0 gives all ones).
InstanceWeights attenuate(const InstanceWeights& weights, double factor);

// Category CSV: 2 rows x 13 columns, ',' separated, "%.18e" (numpy savetxt's default format).
std::string category_to_csv(const IfsParams& params);
// Parses and validates: 2 rows of 13 finite numbers, the probabilities (column 13) each in [0, 1]
// and summing to 1 within kProbabilitySumTolerance. Throws core::FileError naming `source`, the
// line, the value and the rule.
IfsParams category_from_csv(const std::string& text, const std::string& source);

// The 145 x 12 weight table compiled into the binary (3D-FractalDB, MIT licence; data/README.md).
const std::vector<InstanceWeights>& instance_weight_table();
// Parses a weight table in CSV form (used for the embedded copy; exposed for tests).
std::vector<InstanceWeights> parse_weight_table(const std::string& text, const std::string& source);

}  // namespace scaffold::fractal
