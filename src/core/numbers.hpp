// Mathematical constants (C++17 has no std::numbers).
#pragma once

namespace scaffold::core {

// pi to double precision (Python's math.pi).
inline constexpr double kPi = 3.14159265358979323846264338327950288;

}  // namespace scaffold::core
