#include "workloads/scaffold/fractal/acceptance.hpp"

#include <cmath>
#include <limits>

namespace scaffold::fractal {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Accepted:
      return "accepted";
    case Verdict::Runaway:
      return "runaway";
    case Verdict::InvalidValue:
      return "invalid value";
    case Verdict::LowVariance:
      return "variance";
  }
  return "?";
}

Verdict check_cloud(const double* points, int64_t n, bool runaway, double variance_threshold,
                    double normalize, CloudStats* stats) {
  if (runaway) return Verdict::Runaway;
  if (n <= 0) return Verdict::InvalidValue;
  std::array<double, 3> lo, hi, sum{};
  lo.fill(std::numeric_limits<double>::infinity());
  hi.fill(-std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < n; ++i) {
    for (int a = 0; a < 3; ++a) {
      const double v = points[3 * i + a];
      if (!std::isfinite(v)) return Verdict::InvalidValue;
      lo[a] = std::fmin(lo[a], v);
      hi[a] = std::fmax(hi[a], v);
      sum[a] += v;
    }
  }
  std::array<double, 3> mean, scale;
  for (int a = 0; a < 3; ++a) {
    const double range = hi[a] - lo[a];
    if (!std::isfinite(range) || range <= 0.0) return Verdict::InvalidValue;
    mean[a] = sum[a] / static_cast<double>(n);
    scale[a] = (2.0 * normalize) / range;
  }
  // Two passes over the normalised values: their mean, then the population variance (ddof 0).
  std::array<double, 3> norm_sum{}, sq_sum{};
  for (int64_t i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a) norm_sum[a] += (points[3 * i + a] - mean[a]) * scale[a];
  std::array<double, 3> norm_mean;
  for (int a = 0; a < 3; ++a) norm_mean[a] = norm_sum[a] / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      const double d = (points[3 * i + a] - mean[a]) * scale[a] - norm_mean[a];
      sq_sum[a] += d * d;
    }
  bool accepted = true;
  for (int a = 0; a < 3; ++a) {
    const double var = sq_sum[a] / static_cast<double>(n);
    if (stats) stats->variance[a] = var;
    if (!(var > variance_threshold)) accepted = false;
  }
  return accepted ? Verdict::Accepted : Verdict::LowVariance;
}

}  // namespace scaffold::fractal
