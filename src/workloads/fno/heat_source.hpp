// The FNO's analytic fixture problem `heat`: the solution map of the heat equation
// u_t = nu * Laplace(u) on the periodic unit cell [0, 1)^d, d = 1 to 3. Example i is a random
// smooth field u0 (Fourier modes |k_j| <= 8 with amplitudes U(-1, 1) / (1 + |k|^2), scaled to unit
// RMS) and its exact solutions u(t_j) = sum_k u0_k exp(-4 pi^2 nu |k|^2 t_j) exp(2 pi i k.x) at
// t_j = j / t_out, j = 1..t_out. The operator is a Fourier multiplier, so an FNO can represent
// it exactly and learns it in a few epochs: tests and quick runs, not a benchmark problem.
// Deterministic from (seed, offset + index); computed in float64, stored float32.
#pragma once

#include <cstdint>
#include <vector>

#include "dataset/example_source.hpp"

namespace scaffold::fno {

struct HeatOperatorOptions {
  std::vector<int64_t> grid{64};  // points per dimension (1 to 3 entries, each >= 4)
  int64_t t_out = 1;              // output snapshots (channels)
  double diffusivity = 0.002;     // nu
  int64_t max_frequency = 8;      // |k_j| of the random initial field, capped at N_j / 2 - 1
  int64_t count = 100;
  int64_t offset = 0;             // example i is draw offset + i (disjoint splits)
  uint64_t seed = 42;
};

// Examples: fields {input (1, *grid), target (t_out, *grid)} float32.
class HeatOperatorSource : public dataset::ExampleSource {
 public:
  explicit HeatOperatorSource(HeatOperatorOptions options);
  std::size_t size() const override { return static_cast<std::size_t>(options_.count); }
  dataset::Example get(std::size_t index, uint64_t draw) const override;

 private:
  HeatOperatorOptions options_;
};

}  // namespace scaffold::fno
