// Summary statistics of repeated measurements (step times, epoch times, benchmark repetitions):
// the one median definition of the tree and the spread a report states next to it
// (docs/architecture.md, 'Conventions'). Plain two-pass arithmetic on doubles; deliberately no
// percentiles, weights or streaming/online estimators, and no handling of NaN (callers pass
// measured, finite values).
#pragma once

#include <cstddef>
#include <vector>

namespace scaffold::core {

// The median as numpy.median and Python's statistics.median define it: the middle value of the
// sorted values, or the average of the two middle values for an even count. 0 for no values, so
// an empty epoch reports 0 as it always has; callers that must tell "none" apart check empty()
// (or Spread::n) first. Takes a copy, which it sorts.
double median(std::vector<double> values);

// Median, range, mean and sample standard deviation of a set of values.
struct Spread {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation (divisor n - 1); 0 when n < 2
  std::size_t n = 0;    // number of values; every field is 0 when n == 0
};
Spread spread(const std::vector<double>& values);

}  // namespace scaffold::core
