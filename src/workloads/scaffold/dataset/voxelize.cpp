#include "workloads/scaffold/dataset/voxelize.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace scaffold::dataset {

std::vector<int64_t> voxelize_reference(const float* points, int64_t n, int64_t grid) {
  if (n <= 0) return {};
  const double g = static_cast<double>(grid);
  std::array<double, 3> lo, hi;
  for (int a = 0; a < 3; ++a) {
    lo[a] = std::numeric_limits<double>::infinity();
    hi[a] = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      lo[a] = std::min(lo[a], static_cast<double>(points[3 * i + a]));
      hi[a] = std::max(hi[a], static_cast<double>(points[3 * i + a]));
    }
  }
  double max_extent = 0.0;
  for (int a = 0; a < 3; ++a) max_extent = std::max(max_extent, hi[a] - lo[a]);
  const double vs = (max_extent + 1e-6) / g;
  // scaled[i][a] = (p - min) / vs; the span of an axis is the largest scaled value.
  std::vector<std::array<double, 3>> scaled(static_cast<std::size_t>(n));
  std::array<double, 3> span{0.0, 0.0, 0.0};
  for (int64_t i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      scaled[i][a] = (static_cast<double>(points[3 * i + a]) - lo[a]) / vs;
      span[a] = std::max(span[a], scaled[i][a]);
    }
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::array<int64_t, 3> idx;
    for (int a = 0; a < 3; ++a) {
      const double offset = (g - span[a]) / 2.0;
      idx[a] =
          std::clamp<int64_t>(static_cast<int64_t>(std::floor(scaled[i][a] + offset)), 0, grid - 1);
    }
    out.push_back((idx[0] * grid + idx[1]) * grid + idx[2]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void voxelize(const float* points, int64_t n, int64_t grid, std::vector<int64_t>* indices) {
  indices->resize(static_cast<std::size_t>(std::max<int64_t>(n, 0)));
  if (n <= 0) return;
  float lo[3] = {points[0], points[1], points[2]};
  float hi[3] = {points[0], points[1], points[2]};
  for (int64_t i = 1; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      lo[a] = std::min(lo[a], points[3 * i + a]);
      hi[a] = std::max(hi[a], points[3 * i + a]);
    }
  const double g = static_cast<double>(grid);
  double max_extent = 0.0;
  for (int a = 0; a < 3; ++a)
    max_extent = std::max(max_extent, static_cast<double>(hi[a]) - static_cast<double>(lo[a]));
  const double vs = (max_extent + 1e-6) / g;
  // (p - min) / vs is monotone in p, so the span is the scaled maximum: same value as the
  // reference's running maximum, computed once per axis instead of per point.
  double offset[3];
  for (int a = 0; a < 3; ++a)
    offset[a] = (g - (static_cast<double>(hi[a]) - static_cast<double>(lo[a])) / vs) / 2.0;
  const double lod[3] = {lo[0], lo[1], lo[2]};
  for (int64_t i = 0; i < n; ++i) {
    int64_t idx[3];
    for (int a = 0; a < 3; ++a) {
      const double s = (static_cast<double>(points[3 * i + a]) - lod[a]) / vs;
      const auto v = static_cast<int64_t>(std::floor(s + offset[a]));
      idx[a] = v < 0 ? 0 : (v >= grid ? grid - 1 : v);
    }
    (*indices)[static_cast<std::size_t>(i)] = (idx[0] * grid + idx[1]) * grid + idx[2];
  }
}

}  // namespace scaffold::dataset
