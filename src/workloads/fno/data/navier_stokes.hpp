// 2-D incompressible Navier-Stokes in vorticity form on the unit torus, as in the FNO paper:
// w_t + u.grad w = nu Lap w + f, u = (psi_y, -psi_x), -Lap psi = w, with the forcing
// f = a (sin 2pi(x+y) + cos 2pi(x+y)). Fourier pseudo-spectral (the advection product
// dealiased by the 2/3 rule), ETDRK4 in time (the FNO code used Crank-Nicolson with explicit
// Euler advection at dt 1e-4; ETDRK4 is exact for the viscous and forcing parts and fourth
// order in the rest). Index [i, j] = (x_i, y_j) = (i / n, j / n). float64; fixed dt.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace scaffold::fno {

class Etdrk4;

struct NavierStokesSolverOptions {
  int64_t n = 64;  // grid side (even)
  double viscosity = 1e-3;
  double dt = 1e-2;
  double forcing_amplitude = 0.1;  // 0: unforced
};

class NavierStokesSolver {
 public:
  explicit NavierStokesSolver(NavierStokesSolverOptions options);
  ~NavierStokesSolver();
  NavierStokesSolver(NavierStokesSolver&&) noexcept;
  NavierStokesSolver& operator=(NavierStokesSolver&&) noexcept;

  // w: (n, n) or (B, n, n) float64 -> the same shape after `steps` steps of dt.
  at::Tensor advance(const at::Tensor& w, int64_t steps) const;
  // The velocity (u, v) of w, each shaped like w (physical space).
  std::pair<at::Tensor, at::Tensor> velocity(const at::Tensor& w) const;
  // Spectral divergence of a velocity field, i 2 pi (k_x u_hat + k_y v_hat), back on the grid.
  at::Tensor divergence(const at::Tensor& u, const at::Tensor& v) const;
  // Advection CFL number dt * n * max(|u| + |v|) of w.
  double cfl(const at::Tensor& w) const;
  // The forcing on the grid. (n, n) float64.
  at::Tensor forcing() const;
  const NavierStokesSolverOptions& options() const { return options_; }

 private:
  NavierStokesSolverOptions options_;
  at::Tensor kx_, ky_;      // (n, n/2+1) float64, integer wavenumbers
  at::Tensor inv_lap_;      // (n, n/2+1): 1 / (4 pi^2 |k|^2), 0 at k = 0
  at::Tensor mask_;         // (n, n/2+1): the 2/3 rule
  at::Tensor forcing_hat_;  // (n, n/2+1) complex
  std::unique_ptr<Etdrk4> stepper_;
};

}  // namespace scaffold::fno
