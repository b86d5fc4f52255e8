// Python's str(float): the shortest decimal that round-trips, in Python's notation
// (0.15 -> "0.15", 1.0 -> "1.0", 1e-05 -> "1e-05"). ScaFFold names its fractal library folder
// `var<str(variance_threshold)>`, so scaffold must spell thresholds the same way.
#pragma once

#include <string>

namespace scaffold::core {

std::string python_float_str(double value);

}  // namespace scaffold::core
