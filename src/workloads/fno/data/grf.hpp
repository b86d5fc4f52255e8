// Periodic Gaussian random fields on [0, 1)^d (d = 1, 2), the initial conditions of the FNO
// paper: mean zero, covariance C = scale (-Laplacian + tau^2 I)^(-alpha), i.e.
// u(x) = sum_{k != 0} sqrt(lambda_k) xi_k e^{2 pi i k.x} with lambda_k = scale (4 pi^2 |k|^2 +
// tau^2)^(-alpha), xi_{-k} = conj(xi_k), E|xi_k|^2 = 1. Modes with a component at the Nyquist
// frequency are not drawn (they have no real partner on an even grid). The normals come from one
// xoshiro256+ stream keyed by the caller (Box-Muller), never from torch's generator, so a field
// depends only on its key. Not the FNO code's exact draws; the same distribution.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "core/rng.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

// lambda for a wavenumber of squared length k2 = |k|^2 (k in integer units).
double grf_eigenvalue(const GrfOptions& grf, double k2);

// One field on n points (n even, >= 4). (n) float64.
at::Tensor grf_1d(int64_t n, const GrfOptions& grf, uint64_t stream);
// One field on n x n points (n even, >= 4), index [i, j] = (x_i, y_j). (n, n) float64.
at::Tensor grf_2d(int64_t n, const GrfOptions& grf, uint64_t stream);

// Standard normals from a keyed stream (Box-Muller; both values of each pair are used).
class NormalStream {
 public:
  explicit NormalStream(uint64_t key) : rng_(key) {}
  double next();

 private:
  core::Xoshiro256p rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace scaffold::fno
