// 3-D Rayleigh-Benard convection (Boussinesq, free-fall units; CARAML's RBC3D problem, whose data
// pySDC made on a 64 x 64 x 32 grid at Ra 1e5): on [0, aspect)^2 x [0, 1], periodic in x and y,
// no-slip walls, b = 1 at the bottom and 0 at the top,
//   u_t + u.grad u = -grad p + nu Lap u + b e_z,  b_t + u.grad b = kappa Lap b,  div u = 0,
// nu = sqrt(Pr / Ra), kappa = 1 / sqrt(Ra Pr). Fourier in x and y (2/3 rule in both), Chebyshev-
// Gauss-Lobatto collocation in z with products on a 3/2-finer Lobatto grid, as the 2-D solver
// (rayleigh_benard.hpp). The velocity-vorticity form of Kim, Moin & Moser (J. Fluid Mech. 177,
// 1987): per horizontal wavevector k != 0 the vertical velocity w (w = w_z = 0 at the walls, the
// clamped operators of the 2-D streamfunction) obeys the fourth-order equation of Lap w and the
// vertical vorticity eta = v_x - u_y a second-order one; u and v follow from continuity and eta,
// so div u = 0 holds exactly and no pressure is solved for while stepping; the mean flows
// U0(z), V0(z) of k = 0 are stepped on their own. The same IMEX ARS(2,2,2) steps as in 2-D.
// The pressure is diagnosed only when fields are output. float64 throughout.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "workloads/fno/data/rayleigh_benard.hpp"

namespace scaffold::fno {

struct RayleighBenard3dSolverOptions {
  int64_t nx = 64;  // Fourier points in x (even)
  int64_t ny = 64;  // Fourier points in y (even)
  int64_t nz = 32;  // Lobatto points in z, walls included (>= 6)
  double rayleigh = 1e5;
  double prandtl = 0.7;
  double aspect = 4.0;  // the box's side in x and in y; the height is 1
  double dt = 2e-2;
  int64_t nz_products = 0;  // Lobatto points of the product grid; 0: ceil(3 nz / 2)
};

// The solver's state: the rfft2 modes (x index a = 0 .. nx-1, y index b = 0 .. ny/2), flattened
// to M = nx (ny/2 + 1) rows in that order, unnormalised, at the nz - 2 interior Lobatto points
// (the wall values are fixed). Row 0 is k = 0.
struct Rbc3dState {
  at::Tensor w;      // (M, nz-2) complex128: w_k; row 0 holds the mean flow U0(z)
  at::Tensor eta;    // (M, nz-2) complex128: eta_k = (v_x - u_y)_k; row 0 holds V0(z)
  at::Tensor theta;  // (M, nz-2) complex128: b minus the conductive profile 1 - z
  double time = 0.0;
  int64_t steps = 0;
};

class RayleighBenard3dSolver {
 public:
  explicit RayleighBenard3dSolver(RayleighBenard3dSolverOptions options);

  // Conduction plus `amplitude` times a smooth random buoyancy perturbation (Fourier modes
  // |m_x|, |m_y| <= 4, sin(n pi z) for n <= 4) from the keyed stream.
  Rbc3dState initial_state(double amplitude, uint64_t stream) const;
  void step(Rbc3dState* state) const;
  // (5, nx, ny, nz) float64: u_x, u_y, u_z, b, p at (x_i, y_j, z_k), z ascending from the bottom
  // wall (CARAML's RBC3D channels). p has zero mean and includes the hydrostatic part.
  at::Tensor fields(const Rbc3dState& state) const;
  RbcDiagnostics diagnostics(const Rbc3dState& state) const;
  // dt * max(|u| / dx + |v| / dy + |w| / dz_local) over the grid.
  double cfl(const Rbc3dState& state) const;
  at::Tensor z() const { return z_; }  // (nz) ascending
  const RayleighBenard3dSolverOptions& options() const { return options_; }
  int64_t modes() const { return m_; }
  double nu() const { return nu_; }
  double kappa() const { return kappa_; }

 private:
  struct Velocity {
    at::Tensor u, v, w;  // (M, Nz) complex: spectral in x, y; values at the Lobatto points
    at::Tensor wz;       // (M, Nz) complex: w_z from the clamped w (0 at the walls)
  };
  struct Explicit {
    at::Tensor w, eta, theta;  // (M, Ni) complex
  };
  Velocity velocity(const at::Tensor& w, const at::Tensor& eta) const;
  // u, v, w and their x, y and z derivatives (u_x, u_y, u_z, v_x, ...): 12 (M, Nz) fields.
  std::vector<at::Tensor> gradient_hats(const Velocity& velocity) const;
  Explicit explicit_terms(const Rbc3dState& state) const;
  at::Tensor pressure_hat(const Rbc3dState& state) const;  // (M, Nz)
  // (..., M, n) complex -> (..., nx, ny, n) real.
  at::Tensor to_physical(const at::Tensor& field_hat) const;
  // (..., nx, ny, n) real -> (..., M, n) complex.
  at::Tensor to_spectral(const at::Tensor& field) const;

  RayleighBenard3dSolverOptions options_;
  double nu_ = 0.0, kappa_ = 0.0;
  int64_t nyh_ = 0, m_ = 0, ni_ = 0, nf_ = 0;
  at::Tensor z_;                                     // (nz)
  at::Tensor ikx_, iky_, k2_;                        // (M, 1) complex i k_x, i k_y; float64 k^2
  at::Tensor inv_k2_;                                // (M, 1) float64: 1 / k^2, 0 for k = 0
  at::Tensor mask_;                                  // (M, 1) float64: the 2/3 rule in x and y
  at::Tensor mean_row_;                              // (M, 1) float64: 1 in row 0
  at::Tensor d_t_;                                   // (Nz, Nz) complex: values -> d/dz, transposed
  at::Tensor d1c_t_;                                 // (Ni, Nz) complex: clamped w -> w_z
  at::Tensor interp_t_;                              // (Nz, Nf) complex: to the product grid
  at::Tensor project_t_;                             // (Nf, Nz) complex: back, truncated
  at::Tensor cc_weights_;                            // (Nz) float64: mean over z in [0, 1]
  at::Tensor dz_local_;                              // (Nz) float64
  at::Tensor w_mass_, w_lin_, eta_lin_, theta_lin_;  // (M, Ni, Ni) float64
  at::Tensor w_lu_, w_piv_, eta_lu_, eta_piv_, theta_lu_, theta_piv_;
  at::Tensor pressure_lu_, pressure_piv_;  // (M, Nz, Nz)
  at::Tensor d2_wall_t_;                   // (Nz, 2) complex: w -> w_zz at the two walls
};

}  // namespace scaffold::fno
