// Rayleigh-Benard: per Fourier mode m (k = 2 pi m / aspect) and the interior Lobatto points,
//   flow, m >= 1:  (D2 - k^2) psi_t = nu (D4 - 2 k^2 D2 + k^4) psi - i k theta - F[u.grad omega]
//   flow, m = 0:   u0_t = nu D2 u0 - F[u.grad u]_0            (no mean pressure gradient)
//   theta:         theta_t = kappa (D2 - k^2) theta + w - F[u.grad theta]
// with omega = Lap psi (+ u0' in mode 0), D2/D4 the clamped operators for psi and the Dirichlet
// ones for u0 and theta. ARS(2,2,2) (Ascher, Ruuth & Spiteri 1997): both implicit stages use
// M - gamma dt L, factored once. Products are formed on the (nx, nf) grid: 2/3 rule in x, 3/2
// rule in z (interpolate up, multiply, project the Chebyshev series back to nz modes).
#include "workloads/fno/data/rayleigh_benard.hpp"

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

at::Tensor complex_t(const at::Tensor& m) {
  return m.t().contiguous().to(at::kComplexDouble);
}

// Complex (rows, Mx) <-> real (rows, 2 Mx) views (no copy), so real z operators apply to both
// parts in one GEMM.
at::Tensor as_real_rows(const at::Tensor& x) {
  return at::view_as_real(x).reshape({x.size(0), 2 * x.size(1)});
}
at::Tensor as_complex_rows(const at::Tensor& x, int64_t rows) {
  return at::view_as_complex(x.reshape({rows, x.size(1) / 2, 2}));
}
// (B, rows, Mx) complex -> (B, rows, 2 Mx) real.
at::Tensor as_real_batch(const at::Tensor& x) {
  return at::view_as_real(x).reshape({x.size(0), x.size(1), 2 * x.size(2)});
}

}  // namespace

RayleighBenardSolver::RayleighBenardSolver(RayleighBenardSolverOptions options)
    : options_(options) {
  const int64_t nx = options_.nx, nz = options_.nz;
  if (nx < 4 || nx % 2 != 0)
    throw core::Error("Rayleigh-Benard solver: nx must be even and >= 4, got " +
                      std::to_string(nx));
  if (nz < 6)
    throw core::Error("Rayleigh-Benard solver: nz must be >= 6, got " + std::to_string(nz));
  if (!(options_.rayleigh > 0.0) || !(options_.prandtl > 0.0) || !(options_.aspect > 0.0) ||
      !(options_.dt > 0.0))
    throw core::Error("Rayleigh-Benard solver: Ra, Pr, the aspect ratio and dt must be > 0");
  nu_ = std::sqrt(options_.prandtl / options_.rayleigh);
  kappa_ = 1.0 / std::sqrt(options_.rayleigh * options_.prandtl);
  mx_ = nx / 2 + 1;
  ni_ = nz - 2;
  nf_ = options_.nz_products > 0 ? options_.nz_products : (3 * nz + 1) / 2;
  if (nf_ < nz)
    throw core::Error("Rayleigh-Benard solver: the product grid must have at least nz points");

  const rbc::ZOperators zo = rbc::z_operators(nz);
  const at::Tensor &dz = zo.dz, &dz2 = zo.dz2, &d2_int = zo.d2_int, &c_d2 = zo.c_d2,
                   &c_d4 = zo.c_d4;
  z_ = zo.z;
  d_t_ = complex_t(dz);
  d1c_t_ = complex_t(zo.c_d1_full);
  d2c_t_ = complex_t(zo.c_d2_full);
  interp_t_ = complex_t(chebyshev_interpolation_matrix(nz, nf_));
  project_t_ = complex_t(chebyshev_projection_matrix(nz, nf_));
  cc_weights_ = zo.cc_weights;
  dz_local_ = zo.dz_local;
  d2_wall_t_ = complex_t(at::stack({dz2.select(0, 0), dz2.select(0, nz - 1)}));

  // The pre-product fields on the product grid from [psi; u0; theta] at the interior points
  // (psi in the columns m >= 1, u0 in column 0): u, psi, psi_zz, (omega_z parts) D psi_zz and
  // D psi, theta, theta_z, u_z; the k-dependent factors are applied per column afterwards.
  {
    const at::Tensor interp = chebyshev_interpolation_matrix(nz, nf_);
    const at::Tensor pad = at::eye(nz, at::kDouble).slice(1, 1, nz - 1);  // (nz, Ni)
    const at::Tensor &d1c = zo.c_d1_full, &d2c = zo.c_d2_full;
    const at::Tensor none = at::zeros({nf_, ni_}, at::kDouble);
    auto i_of = [&](const at::Tensor& m) { return at::matmul(interp, m); };
    const at::Tensor d_pad = at::matmul(dz, pad), dd_pad = at::matmul(dz2, pad);
    const std::vector<std::vector<at::Tensor>> rows{
        {i_of(d1c), i_of(pad), none},                     // u
        {i_of(pad), none, none},                          // psi
        {i_of(d2c), i_of(d_pad), none},                   // psi_zz (+ u0')
        {i_of(at::matmul(dz, d2c)), i_of(dd_pad), none},  // D psi_zz (+ u0'')
        {i_of(d_pad), none, none},                        // D psi
        {none, none, i_of(pad)},                          // theta
        {none, none, i_of(d_pad)},                        // theta_z
        {i_of(at::matmul(dz, d1c)), i_of(d_pad), none}};  // u_z
    std::vector<at::Tensor> blocks;
    for (const auto& row : rows) blocks.push_back(at::cat(row, 1));
    products_in_ = at::cat(blocks, 0).contiguous();  // (8 Nf, 3 Ni)
    project_int_ =
        chebyshev_projection_matrix(nz, nf_).slice(0, 1, nz - 1).contiguous();  // (Ni, Nf)
  }

  const at::Tensor m = at::arange(mx_, at::kDouble);
  const at::Tensor k = (2.0 * kPi / options_.aspect) * m;
  k2_ = (k * k).unsqueeze(1);
  ik_ = at::complex(at::zeros_like(k), k).unsqueeze(1);
  mask_ = (m * 3.0 < static_cast<double>(nx)).to(at::kDouble).unsqueeze(1);
  mean_row_ = (m == 0.0).to(at::kDouble).unsqueeze(1);
  ik_row_ = ik_.t().contiguous();
  k2_row_ = k2_.t().contiguous();

  const at::Tensor eye = at::eye(ni_, at::kDouble);
  const at::Tensor k2 = k2_.unsqueeze(2);  // (Mx, 1, 1)
  const at::Tensor first = mean_row_.unsqueeze(2);
  flow_mass_ = first * eye + (1.0 - first) * (c_d2 - k2 * eye);
  flow_lin_ = nu_ * (first * d2_int + (1.0 - first) * (c_d4 - 2.0 * k2 * c_d2 + k2 * k2 * eye));
  theta_lin_ = kappa_ * (d2_int - k2 * eye);
  const double gdt = kGamma * options_.dt;
  std::tie(flow_lu_, flow_piv_) = at::linalg_lu_factor(flow_mass_ - gdt * flow_lin_);
  std::tie(theta_lu_, theta_piv_) = at::linalg_lu_factor(eye - gdt * theta_lin_);

  std::tie(pressure_lu_, pressure_piv_) = rbc::pressure_factors(zo, k2);
}

RbcState RayleighBenardSolver::initial_state(double amplitude, uint64_t stream) const {
  const int64_t nx = options_.nx;
  NormalStream normals(stream);
  const at::Tensor x = at::arange(nx, at::kDouble) * (options_.aspect / static_cast<double>(nx));
  const int64_t m_max = std::min<int64_t>(8, (nx - 1) / 3);
  at::Tensor theta = at::zeros({nx, options_.nz}, at::kDouble);
  int terms = 0;
  for (int64_t m = 0; m <= m_max; ++m) {
    const double k = 2.0 * kPi * static_cast<double>(m) / options_.aspect;
    for (int n = 1; n <= 4; ++n) {
      const double a = normals.next(), b = normals.next();
      const at::Tensor profile = at::sin(static_cast<double>(n) * kPi * z_).unsqueeze(0);
      theta += (a * at::cos(k * x) + (m == 0 ? 0.0 : b) * at::sin(k * x)).unsqueeze(1) * profile;
      ++terms;
    }
  }
  theta *= amplitude / std::sqrt(static_cast<double>(terms));
  RbcState s;
  s.theta = interior(at::fft_rfft(theta, c10::nullopt, 0)).contiguous() * mask_;
  s.flow = at::zeros({mx_, ni_}, at::kComplexDouble);
  return s;
}

at::Tensor RayleighBenardSolver::velocity_hat(const at::Tensor& flow, at::Tensor* w_hat) const {
  const at::Tensor psi = flow * (1.0 - mean_row_);
  if (w_hat != nullptr) *w_hat = -ik_ * pad_walls(psi);
  return at::matmul(psi, d1c_t_) + mean_row_ * pad_walls(flow);
}

at::Tensor RayleighBenardSolver::to_physical(const at::Tensor& field_hat) const {
  return at::fft_irfft(field_hat, options_.nx, -2);
}

RayleighBenardSolver::Explicit RayleighBenardSolver::explicit_terms(const at::Tensor& flow,
                                                                    const at::Tensor& theta) const {
  // z-major (Ni, Mx) copies: the z operators are then real matrices applied from the left to the
  // complex data viewed as (rows, 2 Mx) reals, one GEMM for all eight pre-product fields.
  const at::Tensor inputs =
      at::cat({(flow * (1.0 - mean_row_)).t(), (flow * mean_row_).t(), theta.t()}).contiguous();
  const at::Tensor r =
      as_complex_rows(at::matmul(products_in_, as_real_rows(inputs)), 8 * nf_);  // (8 Nf, Mx)
  auto block = [&](int64_t b) { return r.slice(0, b * nf_, (b + 1) * nf_); };
  const at::Tensor u = block(0), psi = block(1);
  const at::Tensor omega = block(2) - k2_row_ * psi;
  const at::Tensor hats =
      at::stack({u, -ik_row_ * psi, ik_row_ * omega, block(3) - k2_row_ * block(4),
                 ik_row_ * block(5), block(6), ik_row_ * u, block(7)});  // (8, Nf, Mx)
  const at::Tensor f = at::fft_irfft(hats, options_.nx, -1);             // (8, Nf, nx)
  const at::Tensor uf = f[0], wf = f[1];
  const at::Tensor products =
      at::stack({uf * f[2] + wf * f[3], uf * f[4] + wf * f[5], uf * f[6] + wf * f[7]});
  const at::Tensor spectra = at::fft_rfft(products, c10::nullopt, -1).contiguous();  // (3, Nf, Mx)
  // Project back to nz Chebyshev modes at the interior points: (3 Ni, Mx) -> three (Mx, Ni).
  const at::Tensor n_hat = at::matmul(project_int_, as_real_batch(spectra));  // (3, Ni, 2 Mx)
  auto mode_major = [&](int64_t i) {
    return at::view_as_complex(n_hat[i].reshape({ni_, mx_, 2})).t() * mask_;
  };
  Explicit e;
  e.flow = -ik_ * theta - (1.0 - mean_row_) * mode_major(0) - mean_row_ * mode_major(2);
  e.theta = -ik_ * (flow * (1.0 - mean_row_)) - mode_major(1);
  return e;
}

void RayleighBenardSolver::step(RbcState* s) const {
  const double h = options_.dt;
  const at::Tensor mass_flow0 = apply(flow_mass_, s->flow);
  const Explicit f0 = explicit_terms(s->flow, s->theta);
  const at::Tensor flow1 = solve(flow_lu_, flow_piv_, mass_flow0 + (h * kGamma) * f0.flow);
  const at::Tensor theta1 = solve(theta_lu_, theta_piv_, s->theta + (h * kGamma) * f0.theta);
  const Explicit f1 = explicit_terms(flow1, theta1);
  const at::Tensor flow2 = solve(flow_lu_, flow_piv_,
                                 mass_flow0 + h * (kDelta * f0.flow + (1.0 - kDelta) * f1.flow) +
                                     (h * (1.0 - kGamma)) * apply(flow_lin_, flow1));
  const at::Tensor theta2 = solve(theta_lu_, theta_piv_,
                                  s->theta + h * (kDelta * f0.theta + (1.0 - kDelta) * f1.theta) +
                                      (h * (1.0 - kGamma)) * apply(theta_lin_, theta1));
  s->flow = flow2 * mask_;
  s->theta = theta2 * mask_;
  s->time += h;
  ++s->steps;
}

at::Tensor RayleighBenardSolver::pressure_hat(const RbcState& s) const {
  const int64_t nz = options_.nz;
  const double nx = static_cast<double>(options_.nx);
  at::Tensor w_hat;
  const at::Tensor u_hat = velocity_hat(s.flow, &w_hat);
  const at::Tensor theta_full = pad_walls(s.theta);
  const at::Tensor hats = at::stack(
      {ik_ * u_hat, at::matmul(u_hat, d_t_), ik_ * w_hat, at::matmul(w_hat, d_t_), u_hat, w_hat});
  const at::Tensor f = to_physical(at::matmul(hats, interp_t_));       // (6, nx, nf)
  const at::Tensor q = f[0] * f[0] + 2.0 * f[1] * f[2] + f[3] * f[3];  // div(u.grad u)
  const at::Tensor nw = f[4] * f[2] + f[5] * f[3];                     // u.grad w
  const at::Tensor spectra =
      at::matmul(at::fft_rfft(at::stack({q, nw}), c10::nullopt, -2), project_t_);
  // Poisson right-hand side: Lap p = db/dz - div(u.grad u), with db/dz = -1 + theta_z.
  at::Tensor rhs = (at::matmul(theta_full, d_t_) - spectra[0]).clone();
  rhs.select(0, 0).sub_(nx);
  const at::Tensor w_zz = at::matmul(w_hat, d2_wall_t_);  // (Mx, 2)
  rhs.select(1, 0).copy_(nu_ * w_zz.select(1, 0));        // dp/dz = nu w_zz + b, b = 0 for m >= 1
  rhs.select(1, nz - 1).copy_(nu_ * w_zz.select(1, 1));
  // m = 0: dp0/dz = <b> - <u.grad w>; the last row is the gauge.
  const at::Tensor b0 = (nx * (1.0 - z_)).to(at::kComplexDouble) + theta_full[0];
  rhs.select(0, 0).copy_(b0 - spectra[1][0]);
  rhs.select(0, 0).select(0, nz - 1).zero_();
  return solve(pressure_lu_, pressure_piv_, rhs) * mask_;
}

at::Tensor RayleighBenardSolver::fields(const RbcState& s) const {
  at::Tensor w_hat;
  const at::Tensor u_hat = velocity_hat(s.flow, &w_hat);
  at::Tensor out =
      to_physical(at::stack({u_hat, w_hat, pad_walls(s.theta), pressure_hat(s)})).contiguous();
  out[2] += (1.0 - z_).unsqueeze(0);
  return out;
}

RbcDiagnostics RayleighBenardSolver::diagnostics(const RbcState& s) const {
  at::Tensor w_hat;
  const at::Tensor u_hat = velocity_hat(s.flow, &w_hat);
  const at::Tensor theta_full = pad_walls(s.theta);
  const at::Tensor f = to_physical(at::stack({u_hat, w_hat, theta_full}));
  auto volume_mean = [&](const at::Tensor& g) {
    return (g.mean(0) * cc_weights_).sum().item<double>();
  };
  RbcDiagnostics d;
  d.kinetic_energy = 0.5 * volume_mean(f[0] * f[0] + f[1] * f[1]);
  d.nusselt_volume = 1.0 + volume_mean(f[1] * f[2]) / kappa_;
  const at::Tensor theta_z0 =
      at::real(at::matmul(theta_full[0], d_t_)) / static_cast<double>(options_.nx);
  d.nusselt_bottom = 1.0 - theta_z0[0].item<double>();
  d.nusselt_top = 1.0 - theta_z0[options_.nz - 1].item<double>();
  d.max_abs_theta = f[2].abs().max().item<double>();
  return d;
}

double RayleighBenardSolver::cfl(const RbcState& s) const {
  at::Tensor w_hat;
  const at::Tensor u_hat = velocity_hat(s.flow, &w_hat);
  const at::Tensor f = to_physical(at::stack({u_hat, w_hat}));
  const double dx = options_.aspect / static_cast<double>(options_.nx);
  return options_.dt * (f[0].abs() / dx + f[1].abs() / dz_local_.unsqueeze(0)).max().item<double>();
}

}  // namespace scaffold::fno
