// Chebyshev-Gauss-Lobatto collocation on [-1, 1] for the wall-bounded direction of the
// Rayleigh-Benard solver: points, the differentiation matrix (Trefethen, Spectral Methods in
// MATLAB, cheb.m), the clamped operators for a function that vanishes with its first derivative
// at both ends (psi = (1 - x^2) q, Trefethen p38), interpolation to another Lobatto grid and the
// projection back that drops the Chebyshev modes the coarse grid cannot hold (3/2-rule
// dealiasing), Clenshaw-Curtis weights. Built in plain double arithmetic, returned as float64
// tensors (rows index the output point, columns the input point). Not a general spectral library.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace scaffold::fno {

// x_j = cos(pi j / (n - 1)), j = 0 .. n-1 (from +1 down to -1). (n) float64. n >= 2.
at::Tensor chebyshev_points(int64_t n);

// d/dx at the n Lobatto points. (n, n) float64.
at::Tensor chebyshev_diff_matrix(int64_t n);

// Operators on the n - 2 interior values of a clamped psi (psi(+-1) = psi'(+-1) = 0), each row
// one point: `full` variants map to all n points (wall rows included), the others to the
// interior points.
struct ClampedOperators {
  at::Tensor d1_full;  // (n, n-2): psi'
  at::Tensor d2_full;  // (n, n-2): psi''
  at::Tensor d2;       // (n-2, n-2): psi'' at the interior points
  at::Tensor d4;       // (n-2, n-2): psi'''' at the interior points
};
ClampedOperators clamped_operators(int64_t n);

// Values at n Lobatto points -> the interpolating polynomial's values at m Lobatto points.
// (m, n) float64.
at::Tensor chebyshev_interpolation_matrix(int64_t n, int64_t m);

// Values at m >= n Lobatto points -> the values at n Lobatto points of the series truncated to
// its first n Chebyshev modes. projection(n, m) x interpolation(n, m) is the identity. (n, m).
at::Tensor chebyshev_projection_matrix(int64_t n, int64_t m);

// Clenshaw-Curtis quadrature weights on the n Lobatto points for the integral over [-1, 1].
// (n) float64; exact for polynomials of degree n - 1.
at::Tensor clenshaw_curtis_weights(int64_t n);

}  // namespace scaffold::fno
