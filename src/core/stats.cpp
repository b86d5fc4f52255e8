// median() and spread(): sort once, then read the order statistics; mean and the sum of squared
// deviations in two passes (not the one-pass sum of squares, which cancels badly for step times
// that differ in the last digits).
#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace scaffold::core {
namespace {

// Median of values that are already sorted ascending.
double sorted_median(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  if (n == 0) return 0.0;
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return sorted_median(values);
}

Spread spread(const std::vector<double>& values) {
  Spread s;
  s.n = values.size();
  if (s.n == 0) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.median = sorted_median(sorted);
  s.min = sorted.front();
  s.max = sorted.back();
  const auto n = static_cast<double>(s.n);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (s.n > 1) {
    double squared_deviations = 0.0;
    for (const double v : sorted) squared_deviations += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squared_deviations / (n - 1.0));
  }
  return s;
}

}  // namespace scaffold::core
