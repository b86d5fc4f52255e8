// 2-D Rayleigh-Benard convection (Boussinesq, free-fall units, as Dedalus' example that made
// CARAML's RBC2D data): on [0, aspect) x [0, 1], periodic in x, no-slip walls, b = 1 at the
// bottom and 0 at the top,
//   u_t + u.grad u = -grad p + nu Lap u + b e_z,  b_t + u.grad b = kappa Lap b,  div u = 0,
// nu = sqrt(Pr / Ra), kappa = 1 / sqrt(Ra Pr). Fourier in x (2/3 rule), Chebyshev-Gauss-Lobatto
// collocation in z (products on a 3/2-finer Lobatto grid, then projected back): Chebyshev because
// its points cluster at the walls, where the thermal and viscous boundary layers are (at Ra 1e7
// about 1/40 of the height: 64 uniform points would give them two points, Lobatto gives them
// eight), and because it converges spectrally, so the tests' onset at Ra 1708 needs few points.
// Streamfunction form (u = psi_z, w = -psi_x) with psi = psi_z = 0 at the walls built into the
// operators, so there is no pressure to solve for while stepping and div u = 0 holds exactly;
// the mean flow u_0(z) is stepped on its own. IMEX Runge-Kutta ARS(2,2,2): diffusion implicit
// (one LU-factored matrix per Fourier mode), advection and buoyancy explicit. Fixed dt.
// The pressure is diagnosed only when fields are output. float64 throughout.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace scaffold::fno {

struct RayleighBenardSolverOptions {
  int64_t nx = 256;  // Fourier points in x (even)
  int64_t nz = 64;   // Lobatto points in z, walls included (>= 6)
  double rayleigh = 1e7;
  double prandtl = 1.0;
  double aspect = 4.0;  // domain width; the height is 1
  double dt = 2e-3;
  int64_t nz_products = 0;  // Lobatto points of the product grid; 0: ceil(3 nz / 2)
};

// The solver's state: Fourier modes m = 0 .. nx/2 in x (rfft, unnormalised) at the nz - 2
// interior Lobatto points in z (the wall values are fixed).
struct RbcState {
  at::Tensor flow;   // (nx/2+1, nz-2) complex128: row 0 the mean flow u_0(z), rows m >= 1 psi_m(z)
  at::Tensor theta;  // (nx/2+1, nz-2) complex128: b minus the conductive profile 1 - z
  double time = 0.0;
  int64_t steps = 0;
};

struct RbcDiagnostics {
  double kinetic_energy = 0.0;  // volume mean of (u^2 + w^2) / 2
  double nusselt_volume = 0.0;  // 1 + <w theta> / kappa
  double nusselt_bottom = 0.0;  // -d<b>/dz at z = 0 (1 for conduction)
  double nusselt_top = 0.0;     // -d<b>/dz at z = 1
  double max_abs_theta = 0.0;
};

class RayleighBenardSolver {
 public:
  explicit RayleighBenardSolver(RayleighBenardSolverOptions options);

  // Conduction (b = 1 - z, no flow) plus `amplitude` times a smooth random buoyancy
  // perturbation (Fourier modes m <= 8, sin(n pi z) for n <= 4) from the keyed stream.
  RbcState initial_state(double amplitude, uint64_t stream) const;
  void step(RbcState* state) const;
  // (4, nx, nz) float64: u_x, u_z, b, p at (x_i, z_j) = (i aspect / nx, z_j), z ascending from
  // the bottom wall. p has zero mean and includes the hydrostatic part.
  at::Tensor fields(const RbcState& state) const;
  RbcDiagnostics diagnostics(const RbcState& state) const;
  // dt * max(|u| / dx + |w| / dz_local) over the grid.
  double cfl(const RbcState& state) const;
  at::Tensor z() const { return z_; }  // (nz) ascending
  const RayleighBenardSolverOptions& options() const { return options_; }
  double nu() const { return nu_; }
  double kappa() const { return kappa_; }

 private:
  struct Explicit {
    at::Tensor flow, theta;  // (Mx, Ni) complex
  };
  Explicit explicit_terms(const at::Tensor& flow, const at::Tensor& theta) const;
  at::Tensor velocity_hat(const at::Tensor& flow, at::Tensor* w_hat) const;  // u_hat (Mx, Nz)
  at::Tensor pressure_hat(const RbcState& state) const;                      // (Mx, Nz)
  at::Tensor to_physical(const at::Tensor& field_hat) const;  // (..., Mx, Nz) -> (..., nx, nz)

  RayleighBenardSolverOptions options_;
  double nu_ = 0.0, kappa_ = 0.0;
  int64_t mx_ = 0, ni_ = 0, nf_ = 0;  // Fourier modes, interior points, product-grid points
  at::Tensor z_;                      // (nz)
  at::Tensor ik_, k2_;                // (Mx, 1) complex i k_m; float64 k_m^2
  at::Tensor mask_;                   // (Mx, 1) float64: the 2/3 rule
  at::Tensor mean_row_;               // (Mx, 1) float64: 1 in row 0
  at::Tensor ik_row_, k2_row_;        // (1, Mx): the same, for z-major data
  at::Tensor products_in_;  // (8 Nf, 3 Ni) float64: [psi; u0; theta] -> pre-product fields
  at::Tensor project_int_;  // (Ni, Nf) float64: product grid -> interior points, truncated
  // z operators, transposed and complex so that X (Mx, from) @ op = (Mx, to).
  at::Tensor d_t_;         // (Nz, Nz) d/dz
  at::Tensor d1c_t_;       // (Ni, Nz) psi -> psi_z (clamped psi)
  at::Tensor d2c_t_;       // (Ni, Nz) psi -> psi_zz
  at::Tensor interp_t_;    // (Nz, Nf) to the product grid
  at::Tensor project_t_;   // (Nf, Nz) back, truncated
  at::Tensor cc_weights_;  // (Nz) float64: Clenshaw-Curtis weights for the mean over z in [0, 1]
  at::Tensor dz_local_;    // (Nz) float64
  // Per-mode matrices (Mx, Ni, Ni) float64 of the two blocks, and the stage solves' LU factors.
  at::Tensor flow_mass_, flow_lin_, theta_lin_;
  at::Tensor flow_lu_, flow_piv_, theta_lu_, theta_piv_;
  at::Tensor pressure_lu_, pressure_piv_;  // (Mx, Nz, Nz)
  at::Tensor d2_wall_t_;                   // (Nz, 2) complex: w -> w_zz at the two walls
};

}  // namespace scaffold::fno
