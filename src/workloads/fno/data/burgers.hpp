// 1-D viscous Burgers, u_t + (u^2 / 2)_x = nu u_xx on [0, 1) periodic: Fourier pseudo-spectral
// in space (the product u^2 dealiased by the 2/3 rule), ETDRK4 in time, so the stiff viscous
// term is integrated exactly and the step is limited by the advection alone. float64
// throughout; one field or a batch (rows are independent). Not adaptive: the caller picks dt.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace scaffold::fno {

class Etdrk4;

struct BurgersSolverOptions {
  int64_t n = 1024;  // grid points x_j = j / n (even)
  double viscosity = 0.1;
  double dt = 1e-3;
};

class BurgersSolver {
 public:
  explicit BurgersSolver(BurgersSolverOptions options);
  ~BurgersSolver();
  BurgersSolver(BurgersSolver&&) noexcept;
  BurgersSolver& operator=(BurgersSolver&&) noexcept;

  // u: (n) or (B, n) float64 -> the same shape after `steps` steps of dt.
  at::Tensor advance(const at::Tensor& u, int64_t steps) const;
  // Advection CFL number dt * max|u| * n of u (any shape).
  double cfl(const at::Tensor& u) const;
  const BurgersSolverOptions& options() const { return options_; }

 private:
  BurgersSolverOptions options_;
  at::Tensor ik_half_;  // (n/2+1) complex: -i pi k (the -(1/2) d/dx of u^2), 2/3-rule masked
  std::unique_ptr<Etdrk4> stepper_;
};

}  // namespace scaffold::fno
