// Rayleigh-Benard in 3-D: per horizontal wavevector k = (k_x, k_y) != 0 and the interior Lobatto
// points, with N = u.grad u and N_b = u.grad theta formed on the product grid,
//   w:      (D2 - k^2) w_t = nu (D4 - 2 k^2 D2 + k^4) w - k^2 theta + D(i k_x N_x + i k_y N_y)
//                            + k^2 N_z
//   eta:    eta_t = nu (D2 - k^2) eta + i k_y N_x - i k_x N_y
//   theta:  theta_t = kappa (D2 - k^2) theta + w - N_b
// (the z components of curl curl and curl of the momentum equation: the pressure drops out), and
// for k = 0 the mean flows U0_t = nu D2 U0 - <N_x>, V0_t = nu D2 V0 - <N_y> (no mean pressure
// gradient), held in row 0 of w and eta. The horizontal velocity follows from continuity
// (i k_x u + i k_y v + w_z = 0) and eta = i k_x v - i k_y u:
//   u = (i k_x w_z + i k_y eta) / k^2,  v = (i k_y w_z - i k_x eta) / k^2.
// With w clamped (w = w_z = 0 at the walls) and eta Dirichlet, u = v = w = 0 at the walls.
#include "workloads/fno/data/rayleigh_benard_3d.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.hpp"
#include "core/numbers.hpp"
#include "workloads/fno/data/chebyshev.hpp"
#include "workloads/fno/data/grf.hpp"
#include "workloads/fno/data/rbc_common.hpp"

namespace scaffold::fno {
namespace {

using rbc::apply;
using rbc::interior;
using rbc::kDelta;
using rbc::kGamma;
using rbc::pad_walls;
using rbc::solve;

using core::kPi;

// A real z operator, given transposed (n_in, n_out), applied to complex (..., n_in) data: both
// parts in one real GEMM.
at::Tensor zmap(const at::Tensor& x, const at::Tensor& op_t) {
  const at::Tensor parts = at::view_as_real(x.contiguous()).transpose(-1, -2);  // (..., 2, n_in)
  return at::view_as_complex(at::matmul(parts, op_t).transpose(-1, -2).contiguous());
}

}  // namespace

RayleighBenard3dSolver::RayleighBenard3dSolver(RayleighBenard3dSolverOptions options)
    : options_(options) {
  const int64_t nx = options_.nx, ny = options_.ny, nz = options_.nz;
  if (nx < 4 || nx % 2 != 0 || ny < 4 || ny % 2 != 0)
    throw core::Error("Rayleigh-Benard 3-D solver: nx and ny must be even and >= 4, got " +
                      std::to_string(nx) + " and " + std::to_string(ny));
  if (nz < 6)
    throw core::Error("Rayleigh-Benard 3-D solver: nz must be >= 6, got " + std::to_string(nz));
  if (!(options_.rayleigh > 0.0) || !(options_.prandtl > 0.0) || !(options_.aspect > 0.0) ||
      !(options_.dt > 0.0))
    throw core::Error("Rayleigh-Benard 3-D solver: Ra, Pr, the aspect ratio and dt must be > 0");
  nu_ = std::sqrt(options_.prandtl / options_.rayleigh);
  kappa_ = 1.0 / std::sqrt(options_.rayleigh * options_.prandtl);
  nyh_ = ny / 2 + 1;
  m_ = nx * nyh_;
  ni_ = nz - 2;
  nf_ = options_.nz_products > 0 ? options_.nz_products : (3 * nz + 1) / 2;
  if (nf_ < nz)
    throw core::Error("Rayleigh-Benard 3-D solver: the product grid must have at least nz points");

  const rbc::ZOperators zo = rbc::z_operators(nz);
  const at::Tensor &dz2 = zo.dz2, &d2_int = zo.d2_int, &c_d2 = zo.c_d2, &c_d4 = zo.c_d4;
  z_ = zo.z;
  d_t_ = zo.dz.t().contiguous();
  d1c_t_ = zo.c_d1_full.t().contiguous();
  interp_t_ = chebyshev_interpolation_matrix(nz, nf_).t().contiguous();
  project_t_ = chebyshev_projection_matrix(nz, nf_).t().contiguous();
  cc_weights_ = zo.cc_weights;
  dz_local_ = zo.dz_local;
  d2_wall_t_ = at::stack({dz2.select(0, 0), dz2.select(0, nz - 1)}).t().contiguous();

  // Wavevectors of the flattened rows r = a nyh + b: m_x = a (a <= nx/2) or a - nx, m_y = b.
  const at::Tensor a = at::arange(nx, at::kDouble);
  const at::Tensor mx = at::where(a <= static_cast<double>(nx / 2), a, a - static_cast<double>(nx));
  const at::Tensor my = at::arange(nyh_, at::kDouble);
  const double k0 = 2.0 * kPi / options_.aspect;
  const at::Tensor kx = (k0 * mx).unsqueeze(1).expand({nx, nyh_}).reshape({m_, 1});
  const at::Tensor ky = (k0 * my).unsqueeze(0).expand({nx, nyh_}).reshape({m_, 1});
  k2_ = kx * kx + ky * ky;
  inv_k2_ = at::where(k2_ > 0.0, 1.0 / at::where(k2_ > 0.0, k2_, at::ones_like(k2_)),
                      at::zeros_like(k2_));
  ikx_ = at::complex(at::zeros_like(kx), kx);
  iky_ = at::complex(at::zeros_like(ky), ky);
  const at::Tensor keep_x = (mx.abs() * 3.0 < static_cast<double>(nx)).unsqueeze(1);
  const at::Tensor keep_y = (my * 3.0 < static_cast<double>(ny)).unsqueeze(0);
  mask_ = at::logical_and(keep_x, keep_y).to(at::kDouble).reshape({m_, 1});
  mean_row_ = at::zeros({m_, 1}, at::kDouble);
  mean_row_[0][0] = 1.0;

  const at::Tensor eye = at::eye(ni_, at::kDouble);
  const at::Tensor k2 = k2_.unsqueeze(2);  // (M, 1, 1)
  const at::Tensor first = mean_row_.unsqueeze(2);
  w_mass_ = first * eye + (1.0 - first) * (c_d2 - k2 * eye);
  w_lin_ = nu_ * (first * d2_int + (1.0 - first) * (c_d4 - 2.0 * k2 * c_d2 + k2 * k2 * eye));
  eta_lin_ = nu_ * (d2_int - k2 * eye);  // row 0: V0, the same operator at k = 0
  theta_lin_ = kappa_ * (d2_int - k2 * eye);
  const double gdt = kGamma * options_.dt;
  std::tie(w_lu_, w_piv_) = at::linalg_lu_factor(w_mass_ - gdt * w_lin_);
  std::tie(eta_lu_, eta_piv_) = at::linalg_lu_factor(eye - gdt * eta_lin_);
  std::tie(theta_lu_, theta_piv_) = at::linalg_lu_factor(eye - gdt * theta_lin_);

  std::tie(pressure_lu_, pressure_piv_) = rbc::pressure_factors(zo, k2);
}

at::Tensor RayleighBenard3dSolver::to_physical(const at::Tensor& field_hat) const {
  auto sizes = field_hat.sizes().vec();
  const int64_t n = sizes.back();
  sizes.pop_back();
  sizes.pop_back();
  std::vector<int64_t> shaped = sizes;
  shaped.insert(shaped.end(), {options_.nx, nyh_, n});
  const int64_t d = static_cast<int64_t>(shaped.size());
  return at::fft_irfftn(field_hat.reshape(shaped), at::IntArrayRef{options_.nx, options_.ny},
                        at::IntArrayRef{d - 3, d - 2});
}

at::Tensor RayleighBenard3dSolver::to_spectral(const at::Tensor& field) const {
  const int64_t d = field.dim();
  const at::Tensor hat = at::fft_rfftn(field, c10::nullopt, at::IntArrayRef{d - 3, d - 2});
  auto sizes = hat.sizes().vec();
  const int64_t n = sizes.back();
  sizes.resize(sizes.size() - 3);
  sizes.insert(sizes.end(), {m_, n});
  return hat.reshape(sizes);
}

Rbc3dState RayleighBenard3dSolver::initial_state(double amplitude, uint64_t stream) const {
  const int64_t nx = options_.nx, ny = options_.ny, nz = options_.nz;
  NormalStream normals(stream);
  const double step_x = options_.aspect / static_cast<double>(nx);
  const double step_y = options_.aspect / static_cast<double>(ny);
  const at::Tensor x = (at::arange(nx, at::kDouble) * step_x).view({nx, 1, 1});
  const at::Tensor y = (at::arange(ny, at::kDouble) * step_y).view({1, ny, 1});
  const int64_t mx_max = std::min<int64_t>(4, (nx - 1) / 3);
  const int64_t my_max = std::min<int64_t>(4, (ny - 1) / 3);
  const double k0 = 2.0 * kPi / options_.aspect;
  at::Tensor theta = at::zeros({nx, ny, nz}, at::kDouble);
  int terms = 0;
  for (int64_t my = 0; my <= my_max; ++my)
    for (int64_t mx = (my == 0 ? 0 : -mx_max); mx <= mx_max; ++mx) {
      const at::Tensor phase =
          (k0 * static_cast<double>(mx)) * x + (k0 * static_cast<double>(my)) * y;
      const bool constant = mx == 0 && my == 0;
      for (int n = 1; n <= 4; ++n) {
        const double c = normals.next(), s = normals.next();
        const at::Tensor profile = at::sin(static_cast<double>(n) * kPi * z_).view({1, 1, nz});
        theta += (c * at::cos(phase) + (constant ? 0.0 : s) * at::sin(phase)) * profile;
        ++terms;
      }
    }
  theta *= amplitude / std::sqrt(static_cast<double>(terms));
  Rbc3dState st;
  st.theta = interior(to_spectral(theta)).contiguous() * mask_;
  st.w = at::zeros({m_, ni_}, at::kComplexDouble);
  st.eta = at::zeros({m_, ni_}, at::kComplexDouble);
  return st;
}

RayleighBenard3dSolver::Velocity RayleighBenard3dSolver::velocity(const at::Tensor& w,
                                                                  const at::Tensor& eta) const {
  const at::Tensor wk = w * (1.0 - mean_row_);
  Velocity v;
  v.w = pad_walls(wk);
  v.wz = zmap(wk, d1c_t_);
  const at::Tensor eta_full = pad_walls(eta);
  v.u = inv_k2_ * (ikx_ * v.wz + iky_ * eta_full) + mean_row_ * pad_walls(w);
  v.v = inv_k2_ * (iky_ * v.wz - ikx_ * eta_full) + mean_row_ * eta_full;
  return v;
}

std::vector<at::Tensor> RayleighBenard3dSolver::gradient_hats(const Velocity& vel) const {
  return {vel.u,        vel.v,        vel.w,
          ikx_ * vel.u, iky_ * vel.u, zmap(vel.u, d_t_),
          ikx_ * vel.v, iky_ * vel.v, zmap(vel.v, d_t_),
          ikx_ * vel.w, iky_ * vel.w, vel.wz};
}

RayleighBenard3dSolver::Explicit RayleighBenard3dSolver::explicit_terms(const Rbc3dState& s) const {
  const Velocity vel = velocity(s.w, s.eta);
  const at::Tensor th = pad_walls(s.theta);
  std::vector<at::Tensor> hats = gradient_hats(vel);
  hats.insert(hats.end(), {ikx_ * th, iky_ * th, zmap(th, d_t_)});     // + b_x, b_y, b_z
  const at::Tensor f = to_physical(zmap(at::stack(hats), interp_t_));  // (15, nx, ny, Nf)
  const at::Tensor u = f[0], v = f[1], w = f[2];
  auto advect = [&](int64_t i) { return u * f[i] + v * f[i + 1] + w * f[i + 2]; };
  const at::Tensor n_hat =
      zmap(to_spectral(at::stack({advect(3), advect(6), advect(9), advect(12)})),
           project_t_) *
      mask_;  // (4, M, Nz): N_x, N_y, N_z, N_b
  const at::Tensor nx = n_hat[0], ny = n_hat[1], nz = n_hat[2];
  Explicit e;
  const at::Tensor wk = interior(vel.w);
  e.w = (1.0 - mean_row_) *
            (-k2_ * s.theta + interior(zmap(ikx_ * nx + iky_ * ny, d_t_)) + k2_ * interior(nz)) -
        mean_row_ * interior(nx);
  e.eta = iky_ * interior(nx) - ikx_ * interior(ny) - mean_row_ * interior(ny);
  e.theta = wk - interior(n_hat[3]);
  e.w = e.w * mask_;
  e.eta = e.eta * mask_;
  e.theta = e.theta * mask_;
  return e;
}

void RayleighBenard3dSolver::step(Rbc3dState* s) const {
  const double h = options_.dt;
  const at::Tensor mass_w0 = apply(w_mass_, s->w);
  const Explicit f0 = explicit_terms(*s);
  Rbc3dState s1;
  s1.w = solve(w_lu_, w_piv_, mass_w0 + (h * kGamma) * f0.w);
  s1.eta = solve(eta_lu_, eta_piv_, s->eta + (h * kGamma) * f0.eta);
  s1.theta = solve(theta_lu_, theta_piv_, s->theta + (h * kGamma) * f0.theta);
  const Explicit f1 = explicit_terms(s1);
  auto combine = [&](const at::Tensor& x0, const at::Tensor& e0, const at::Tensor& e1,
                     const at::Tensor& lin, const at::Tensor& x1) {
    return x0 + h * (kDelta * e0 + (1.0 - kDelta) * e1) + (h * (1.0 - kGamma)) * apply(lin, x1);
  };
  const at::Tensor w2 = solve(w_lu_, w_piv_, combine(mass_w0, f0.w, f1.w, w_lin_, s1.w));
  const at::Tensor eta2 =
      solve(eta_lu_, eta_piv_, combine(s->eta, f0.eta, f1.eta, eta_lin_, s1.eta));
  const at::Tensor theta2 =
      solve(theta_lu_, theta_piv_, combine(s->theta, f0.theta, f1.theta, theta_lin_, s1.theta));
  s->w = w2 * mask_;
  s->eta = eta2 * mask_;
  s->theta = theta2 * mask_;
  s->time += h;
  ++s->steps;
}

at::Tensor RayleighBenard3dSolver::pressure_hat(const Rbc3dState& s) const {
  const int64_t nz = options_.nz;
  const double area = static_cast<double>(options_.nx * options_.ny);
  const Velocity vel = velocity(s.w, s.eta);
  const at::Tensor theta_full = pad_walls(s.theta);
  const at::Tensor f = to_physical(zmap(at::stack(gradient_hats(vel)), interp_t_));  // (12, ...)
  // div(u.grad u) = sum_ij d_i u_j d_j u_i for a divergence-free u; u.grad w for the mean.
  const at::Tensor q =
      f[3] * f[3] + f[7] * f[7] + f[11] * f[11] + 2.0 * (f[4] * f[6] + f[5] * f[9] + f[8] * f[10]);
  const at::Tensor nw = f[0] * f[9] + f[1] * f[10] + f[2] * f[11];
  const at::Tensor spectra = zmap(to_spectral(at::stack({q, nw})), project_t_);  // (2, M, Nz)
  // Poisson right-hand side: Lap p = db/dz - div(u.grad u), with db/dz = -1 + theta_z.
  at::Tensor rhs = (zmap(theta_full, d_t_) - spectra[0]).clone();
  rhs.select(0, 0).sub_(area);
  const at::Tensor w_zz = zmap(vel.w, d2_wall_t_);  // (M, 2)
  rhs.select(1, 0).copy_(nu_ * w_zz.select(1, 0));  // dp/dz = nu w_zz + b, b = 0 for k != 0
  rhs.select(1, nz - 1).copy_(nu_ * w_zz.select(1, 1));
  // k = 0: dp0/dz = <b> - <u.grad w>; the last row is the gauge.
  const at::Tensor b0 = (area * (1.0 - z_)).to(at::kComplexDouble) + theta_full[0];
  rhs.select(0, 0).copy_(b0 - spectra[1][0]);
  rhs.select(0, 0).select(0, nz - 1).zero_();
  return solve(pressure_lu_, pressure_piv_, rhs) * mask_;
}

at::Tensor RayleighBenard3dSolver::fields(const Rbc3dState& s) const {
  const Velocity vel = velocity(s.w, s.eta);
  at::Tensor out =
      to_physical(at::stack({vel.u, vel.v, vel.w, pad_walls(s.theta), pressure_hat(s)}))
          .contiguous();
  out[3] += (1.0 - z_).view({1, 1, options_.nz});
  return out;
}

RbcDiagnostics RayleighBenard3dSolver::diagnostics(const Rbc3dState& s) const {
  const Velocity vel = velocity(s.w, s.eta);
  const at::Tensor theta_full = pad_walls(s.theta);
  const at::Tensor f = to_physical(at::stack({vel.u, vel.v, vel.w, theta_full}));
  auto volume_mean = [&](const at::Tensor& g) {
    return (g.mean(at::IntArrayRef{0, 1}) * cc_weights_).sum().item<double>();
  };
  RbcDiagnostics d;
  d.kinetic_energy = 0.5 * volume_mean(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]);
  d.nusselt_volume = 1.0 + volume_mean(f[2] * f[3]) / kappa_;
  const at::Tensor theta_z0 =
      at::real(zmap(theta_full[0], d_t_)) / static_cast<double>(options_.nx * options_.ny);
  d.nusselt_bottom = 1.0 - theta_z0[0].item<double>();
  d.nusselt_top = 1.0 - theta_z0[options_.nz - 1].item<double>();
  d.max_abs_theta = f[3].abs().max().item<double>();
  return d;
}

double RayleighBenard3dSolver::cfl(const Rbc3dState& s) const {
  const Velocity vel = velocity(s.w, s.eta);
  const at::Tensor f = to_physical(at::stack({vel.u, vel.v, vel.w}));
  const double dx = options_.aspect / static_cast<double>(options_.nx);
  const double dy = options_.aspect / static_cast<double>(options_.ny);
  return options_.dt *
         (f[0].abs() / dx + f[1].abs() / dy + f[2].abs() / dz_local_.view({1, 1, options_.nz}))
             .max()
             .item<double>();
}

}  // namespace scaffold::fno
