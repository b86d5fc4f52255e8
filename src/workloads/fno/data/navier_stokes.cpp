// Navier-Stokes: the state is rfft2(w) (backward normalisation). L = -nu 4 pi^2 |k|^2; N(w) =
// f_hat - F[u w_x + v w_y] on the 2/3-rule modes, with u, v, w_x, w_y from one batched irfft2.
#include "workloads/fno/data/navier_stokes.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.hpp"
#include "core/numbers.hpp"
#include "workloads/fno/data/spectral.hpp"

namespace scaffold::fno {
namespace {

using core::kPi;

at::Tensor times_i(const at::Tensor& real_factor, const at::Tensor& z) {
  return at::complex(at::zeros_like(real_factor), real_factor) * z;
}

}  // namespace

NavierStokesSolver::NavierStokesSolver(NavierStokesSolverOptions options) : options_(options) {
  const int64_t n = options_.n;
  if (n < 4 || n % 2 != 0)
    throw core::Error("Navier-Stokes solver: the grid must be even and >= 4, got " +
                      std::to_string(n));
  if (!(options_.viscosity >= 0.0))
    throw core::Error("Navier-Stokes solver: the viscosity must be >= 0");
  kx_ = fft_wavenumbers(n).unsqueeze(1).expand({n, n / 2 + 1}).contiguous();
  ky_ = rfft_wavenumbers(n).unsqueeze(0).expand({n, n / 2 + 1}).contiguous();
  const at::Tensor k2 = kx_ * kx_ + ky_ * ky_;
  const at::Tensor lap = 4.0 * kPi * kPi * k2;  // -Laplacian
  inv_lap_ =
      at::where(k2 > 0.0, 1.0 / at::where(k2 > 0.0, lap, at::ones_like(lap)), at::zeros_like(lap));
  mask_ = dealias_mask(kx_, n) * dealias_mask(ky_, n);
  forcing_hat_ = at::fft_rfft2(forcing());
  const at::Tensor L = -options_.viscosity * lap;

  const at::Tensor two_pi_kx = 2.0 * kPi * kx_, two_pi_ky = 2.0 * kPi * ky_;
  const at::Tensor inv_lap = inv_lap_, mask = mask_, f_hat = forcing_hat_;
  stepper_ = std::make_unique<Etdrk4>(L, options_.dt, [=](const at::Tensor& w_hat) {
    const at::Tensor psi_hat = w_hat * inv_lap;
    const at::Tensor hats = at::stack({times_i(two_pi_ky, psi_hat), times_i(-two_pi_kx, psi_hat),
                                       times_i(two_pi_kx, w_hat), times_i(two_pi_ky, w_hat)},
                                      -3);
    const at::Tensor fields = at::fft_irfft2(hats, at::IntArrayRef({n, n}));  // (..., 4, n, n)
    const at::Tensor advection =
        fields.select(-3, 0) * fields.select(-3, 2) + fields.select(-3, 1) * fields.select(-3, 3);
    return f_hat - mask * at::fft_rfft2(advection);
  });
}

NavierStokesSolver::~NavierStokesSolver() = default;
NavierStokesSolver::NavierStokesSolver(NavierStokesSolver&&) noexcept = default;
NavierStokesSolver& NavierStokesSolver::operator=(NavierStokesSolver&&) noexcept = default;

at::Tensor NavierStokesSolver::advance(const at::Tensor& w, int64_t steps) const {
  const int64_t n = options_.n;
  SCAFFOLD_CHECK(w.scalar_type() == at::kDouble && w.size(-1) == n && w.size(-2) == n,
                 "Navier-Stokes: (B, n, n) float64 expected");
  at::Tensor w_hat = at::fft_rfft2(w);
  for (int64_t s = 0; s < steps; ++s) w_hat = stepper_->step(w_hat);
  return at::fft_irfft2(w_hat, at::IntArrayRef({n, n}));
}

std::pair<at::Tensor, at::Tensor> NavierStokesSolver::velocity(const at::Tensor& w) const {
  const int64_t n = options_.n;
  const at::Tensor psi_hat = at::fft_rfft2(w) * inv_lap_;
  return {at::fft_irfft2(times_i(2.0 * kPi * ky_, psi_hat), at::IntArrayRef({n, n})),
          at::fft_irfft2(times_i(-2.0 * kPi * kx_, psi_hat), at::IntArrayRef({n, n}))};
}

at::Tensor NavierStokesSolver::divergence(const at::Tensor& u, const at::Tensor& v) const {
  const int64_t n = options_.n;
  return at::fft_irfft2(
      times_i(2.0 * kPi * kx_, at::fft_rfft2(u)) + times_i(2.0 * kPi * ky_, at::fft_rfft2(v)),
      at::IntArrayRef({n, n}));
}

double NavierStokesSolver::cfl(const at::Tensor& w) const {
  const auto [u, v] = velocity(w);
  return options_.dt * static_cast<double>(options_.n) * (u.abs() + v.abs()).max().item<double>();
}

at::Tensor NavierStokesSolver::forcing() const {
  const int64_t n = options_.n;
  const at::Tensor x = at::arange(n, at::kDouble) / static_cast<double>(n);
  const at::Tensor phase = 2.0 * kPi * (x.unsqueeze(1) + x.unsqueeze(0));
  return options_.forcing_amplitude * (at::sin(phase) + at::cos(phase));
}

}  // namespace scaffold::fno
