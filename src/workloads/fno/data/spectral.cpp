// Wavenumbers, 2/3-rule masks and ETDRK4. The phi-function coefficients are means over
// `contour_points` points on the upper half of a unit circle around each h L (Kassam &
// Trefethen's trick): it avoids the cancellation of (e^z - 1 - z ...)/z^3 near z = 0, and the
// real part of the half-circle mean is the full-circle mean because L is real.
#include "workloads/fno/data/spectral.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "core/numbers.hpp"

namespace scaffold::fno {
namespace {
using core::kPi;
}  // namespace

at::Tensor fft_wavenumbers(int64_t n) {
  at::Tensor k = at::arange(n, at::kDouble);
  return at::where(k < static_cast<double>((n + 1) / 2), k, k - static_cast<double>(n));
}

at::Tensor rfft_wavenumbers(int64_t n) {
  return at::arange(n / 2 + 1, at::kDouble);
}

at::Tensor dealias_mask(const at::Tensor& k, int64_t n) {
  return (at::abs(k) * 3.0 < static_cast<double>(n)).to(at::kDouble);
}

Etdrk4::Etdrk4(const at::Tensor& L, double h,
               std::function<at::Tensor(const at::Tensor&)> nonlinear, int contour_points)
    : h_(h), nonlinear_(std::move(nonlinear)) {
  if (!(h > 0.0)) throw core::Error("ETDRK4: the time step must be > 0");
  SCAFFOLD_CHECK(L.scalar_type() == at::kDouble, "ETDRK4 needs a float64 linear part");
  const at::Tensor hl = L * h;
  e_ = at::exp(hl);
  e2_ = at::exp(hl / 2.0);
  const int64_t m = contour_points;
  const at::Tensor angle =
      (at::arange(1, m + 1, at::kDouble) - 0.5) * (kPi / static_cast<double>(m));
  const at::Tensor roots = at::polar(at::ones({m}, at::kDouble), angle);  // (M) complex
  const at::Tensor lr = hl.unsqueeze(-1).to(at::kComplexDouble) + roots;  // (*L, M)
  const at::Tensor elr = at::exp(lr), elr2 = at::exp(lr / 2.0);
  const at::Tensor lr2 = lr * lr, lr3 = lr2 * lr;
  auto mean_real = [&](const at::Tensor& z) { return at::real(z.mean(-1)).contiguous() * h; };
  q_ = mean_real((elr2 - 1.0) / lr);
  f1_ = mean_real((-4.0 - lr + elr * (4.0 - 3.0 * lr + lr2)) / lr3);
  f2_ = mean_real((2.0 + lr + elr * (lr - 2.0)) / lr3);
  f3_ = mean_real((-4.0 - 3.0 * lr - lr2 + elr * (4.0 - lr)) / lr3);
}

at::Tensor Etdrk4::step(const at::Tensor& v) const {
  const at::Tensor nv = nonlinear_(v);
  const at::Tensor a = e2_ * v + q_ * nv;
  const at::Tensor na = nonlinear_(a);
  const at::Tensor b = e2_ * v + q_ * na;
  const at::Tensor nb = nonlinear_(b);
  const at::Tensor c = e2_ * a + q_ * (2.0 * nb - nv);
  const at::Tensor nc = nonlinear_(c);
  return e_ * v + f1_ * nv + 2.0 * f2_ * (na + nb) + f3_ * nc;
}

}  // namespace scaffold::fno
