// Hand-made IFS categories for the fractal tests.
#pragma once

#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::fractal::test {

// Both maps diagonal: x' = a x + j, y' = b y + k, z' = c z + l (probabilities from |det|).
inline IfsParams diagonal_category(double a0, double a1, double b = 0.5, double c = 0.5) {
  IfsParams p;
  p.maps[0] = {a0, 0, 0, 0, b, 0, 0, 0, c, 0.1, 0.2, -0.3, 0};
  p.maps[1] = {a1, 0, 0, 0, -b, 0, 0, 0, c, -0.4, 0.1, 0.25, 0};
  set_probabilities(p);
  return p;
}

}  // namespace scaffold::fractal::test
