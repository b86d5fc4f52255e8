// What the 2-D and 3-D Rayleigh-Benard solvers share (rayleigh_benard.hpp,
// rayleigh_benard_3d.hpp): the z operators on the Lobatto points of [0, 1], the wall padding of
// interior values, the per-mode real matrices applied to complex data, the ARS(2,2,2) constants
// and the pressure's per-mode Neumann operator. Internal to the FNO data generators.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace scaffold::fno::rbc {

// ARS(2,2,2) (Ascher, Ruuth & Spiteri 1997): gamma = 1 - 1/sqrt(2), delta = 1 - 1/(2 gamma).
extern const double kGamma;
extern const double kDelta;

// z operators on the nz Lobatto points, z = (1 - x) / 2 ascending from the bottom wall (so
// d/dz = -2 d/dx); every matrix float64, rows the output point.
struct ZOperators {
  at::Tensor z;           // (nz)
  at::Tensor dz, dz2;     // (nz, nz) d/dz, d2/dz2
  at::Tensor d2_int;      // (Ni, Ni) d2/dz2 of a Dirichlet field at the interior points
  at::Tensor c_d1_full;   // (nz, Ni) a clamped field's d/dz at every point
  at::Tensor c_d2_full;   // (nz, Ni) its d2/dz2 at every point
  at::Tensor c_d2, c_d4;  // (Ni, Ni) its d2/dz2 and d4/dz4 at the interior points
  at::Tensor cc_weights;  // (nz) Clenshaw-Curtis weights of the mean over [0, 1]
  at::Tensor dz_local;    // (nz) the smaller gap to a neighbouring point
};
ZOperators z_operators(int64_t nz);

// Zero wall values around interior ones: (..., Ni) -> (..., Ni + 2).
at::Tensor pad_walls(const at::Tensor& x);
// The interior values: (..., Ni + 2) -> (..., Ni).
at::Tensor interior(const at::Tensor& x);
// Real (M, n, n) matrices times complex (M, n) vectors, real and imaginary parts at once.
at::Tensor apply(const at::Tensor& mats, const at::Tensor& x);
// Solves with LU factors of real (M, n, n) matrices for complex (M, n) right-hand sides.
at::Tensor solve(const at::Tensor& lu, const at::Tensor& pivots, const at::Tensor& rhs);

// LU factors of the pressure operator per mode, k2 (M, 1, 1): (D2 - k^2) with Neumann rows at
// the walls for every mode but the first; the first (k = 0) the first-order equation dp0/dz = g
// with its last row replaced by the zero-mean gauge.
std::pair<at::Tensor, at::Tensor> pressure_factors(const ZOperators& z, const at::Tensor& k2);

}  // namespace scaffold::fno::rbc
