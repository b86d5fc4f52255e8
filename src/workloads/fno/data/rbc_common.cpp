#include "workloads/fno/data/rbc_common.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "workloads/fno/data/chebyshev.hpp"

namespace scaffold::fno::rbc {

const double kGamma = 1.0 - 1.0 / std::sqrt(2.0);
const double kDelta = 1.0 - 1.0 / (2.0 * kGamma);

ZOperators z_operators(int64_t nz) {
  ZOperators o;
  o.z = (1.0 - chebyshev_points(nz)) / 2.0;
  o.dz = -2.0 * chebyshev_diff_matrix(nz);
  o.dz2 = at::matmul(o.dz, o.dz);
  o.d2_int = o.dz2.slice(0, 1, nz - 1).slice(1, 1, nz - 1);
  const ClampedOperators c = clamped_operators(nz);
  o.c_d1_full = -2.0 * c.d1_full;
  o.c_d2_full = 4.0 * c.d2_full;
  o.c_d2 = 4.0 * c.d2;
  o.c_d4 = 16.0 * c.d4;
  o.cc_weights = clenshaw_curtis_weights(nz) / 2.0;
  const at::Tensor gaps = o.z.slice(0, 1) - o.z.slice(0, 0, nz - 1);  // (nz - 1)
  o.dz_local =
      at::minimum(at::cat({gaps.slice(0, 0, 1), gaps}), at::cat({gaps, gaps.slice(0, nz - 2)}));
  return o;
}

at::Tensor pad_walls(const at::Tensor& x) {
  auto sizes = x.sizes().vec();
  sizes.back() = 1;
  const at::Tensor zero = at::zeros(sizes, x.options());
  return at::cat({zero, x, zero}, -1);
}

at::Tensor interior(const at::Tensor& x) {
  return x.slice(-1, 1, x.size(-1) - 1);
}

at::Tensor apply(const at::Tensor& mats, const at::Tensor& x) {
  return at::view_as_complex(at::bmm(mats, at::view_as_real(x.contiguous())).contiguous());
}

at::Tensor solve(const at::Tensor& lu, const at::Tensor& pivots, const at::Tensor& rhs) {
  return at::view_as_complex(
      at::linalg_lu_solve(lu, pivots, at::view_as_real(rhs.contiguous())).contiguous());
}

std::pair<at::Tensor, at::Tensor> pressure_factors(const ZOperators& z, const at::Tensor& k2) {
  const int64_t nz = z.z.size(0), modes = k2.size(0);
  const at::Tensor eye_z = at::eye(nz, at::kDouble);
  at::Tensor pressure = (z.dz2.unsqueeze(0) - k2 * eye_z).clone();
  pressure.select(1, 0).copy_(z.dz.select(0, 0).expand({modes, nz}));
  pressure.select(1, nz - 1).copy_(z.dz.select(0, nz - 1).expand({modes, nz}));
  pressure.select(0, 0).copy_(z.dz);
  pressure.select(0, 0).select(0, nz - 1).copy_(z.cc_weights);
  auto [lu, pivots] = at::linalg_lu_factor(pressure);
  return {lu, pivots};
}

}  // namespace scaffold::fno::rbc
