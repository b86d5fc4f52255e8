// Text as Python writes it, for files that Python tools (ScaFFold, pandas, jpwr) write too.
// python_float_str is Python's str(float): the shortest decimal that round-trips, in Python's
// notation (0.15 -> "0.15", 1.0 -> "1.0", 1e-05 -> "1e-05"). ScaFFold names its fractal library
// folder `var<str(variance_threshold)>`, so scaffold must spell thresholds the same way.
#pragma once

#include <string>
#include <string_view>

namespace scaffold::core {

std::string python_float_str(double value);

// python_float_str, or "" for NaN (a missing value in a CSV, as pandas writes NaN).
std::string python_float_str_or_empty(double value);

// One CSV field as Python's csv module writes it (QUOTE_MINIMAL, RFC 4180): quoted, with doubled
// quotes, only when it holds a comma, a quote, CR or LF.
std::string csv_field(std::string_view text);

}  // namespace scaffold::core
