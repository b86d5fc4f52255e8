// Burgers: L = -nu (2 pi k)^2, N(v) = -i pi k F[u^2] on the 2/3-rule modes. The state is the
// rfft of u (backward normalisation), so products are formed on the n-point grid.
#include "workloads/fno/data/burgers.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.hpp"
#include "core/numbers.hpp"
#include "workloads/fno/data/spectral.hpp"

namespace scaffold::fno {
namespace {
using core::kPi;
}  // namespace

BurgersSolver::BurgersSolver(BurgersSolverOptions options) : options_(options) {
  const int64_t n = options_.n;
  if (n < 4 || n % 2 != 0)
    throw core::Error("Burgers solver: the grid must be even and >= 4, got " + std::to_string(n));
  if (!(options_.viscosity > 0.0)) throw core::Error("Burgers solver: the viscosity must be > 0");
  const at::Tensor k = rfft_wavenumbers(n);
  const at::Tensor L = -options_.viscosity * (2.0 * kPi * k) * (2.0 * kPi * k);
  ik_half_ = at::complex(at::zeros_like(k), -kPi * k * dealias_mask(k, n));
  const at::Tensor ik = ik_half_;
  stepper_ = std::make_unique<Etdrk4>(L, options_.dt, [ik, n](const at::Tensor& v) {
    const at::Tensor u = at::fft_irfft(v, n, -1);
    return ik * at::fft_rfft(u * u, c10::nullopt, -1);
  });
}

BurgersSolver::~BurgersSolver() = default;
BurgersSolver::BurgersSolver(BurgersSolver&&) noexcept = default;
BurgersSolver& BurgersSolver::operator=(BurgersSolver&&) noexcept = default;

at::Tensor BurgersSolver::advance(const at::Tensor& u, int64_t steps) const {
  SCAFFOLD_CHECK(u.scalar_type() == at::kDouble && u.size(-1) == options_.n,
                 "Burgers: (B, n) float64 expected");
  at::Tensor v = at::fft_rfft(u, c10::nullopt, -1);
  for (int64_t s = 0; s < steps; ++s) v = stepper_->step(v);
  return at::fft_irfft(v, options_.n, -1);
}

double BurgersSolver::cfl(const at::Tensor& u) const {
  return options_.dt * u.abs().max().item<double>() * static_cast<double>(options_.n);
}

}  // namespace scaffold::fno
