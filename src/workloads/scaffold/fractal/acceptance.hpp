// Acceptance test for a candidate cloud (docs/fractals.md: ScaFFold's code's rule, not its
// README's): reject runaway or non-finite clouds and zero or non-finite ranges; normalise each
// axis to (p - mean) * 2 * normalize / (max - min); accept when every per-axis population variance
// of the normalised cloud is above the threshold.
#pragma once

#include <array>
#include <cstdint>

namespace scaffold::fractal {

enum class Verdict : uint8_t { Accepted = 0, Runaway = 1, InvalidValue = 2, LowVariance = 3 };
const char* verdict_name(Verdict verdict);

struct CloudStats {
  std::array<double, 3> variance{};  // per axis, of the normalised cloud (valid when computed)
};

// points: n x 3 float64, row-major. `runaway` is the chaos game's flag.
Verdict check_cloud(const double* points, int64_t n, bool runaway, double variance_threshold,
                    double normalize, CloudStats* stats = nullptr);

}  // namespace scaffold::fractal
