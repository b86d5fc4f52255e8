// The 3-D Rayleigh-Benard solver against references it shares no code with:
// - the 2-D solver (streamfunction form, rayleigh_benard.cpp) on flows invariant in y and, with
//   the axes swapped, in x: the velocity-vorticity form must give the same u, w, b and p;
// - the onset of convection at Ra 1707.76 on an oblique wavevector (k_x = k_y, |k| = 3.117),
//   which only the coupled u, v and eta paths carry;
// - the momentum equations in primitive variables, every term computed here from the output
//   fields (spectral x and y derivatives, the Chebyshev z derivative) and u_t from consecutive
//   states, on a fully 3-D flow: this checks the diagnosed pressure too;
// - the conductive state below onset, the wall conditions, div u = 0 and second order in time.
#include <gtest/gtest.h>

#include <cmath>

#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/chebyshev.hpp"
#include "workloads/fno/data/rayleigh_benard.hpp"
#include "workloads/fno/data/rayleigh_benard_3d.hpp"

namespace scaffold::fno {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct FnoRayleighBenard3d : test::SingleThreaded {
  static RayleighBenard3dSolverOptions options(int64_t nx, int64_t ny, int64_t nz, double ra,
                                               double aspect, double dt) {
    RayleighBenard3dSolverOptions o;
    o.nx = nx;
    o.ny = ny;
    o.nz = nz;
    o.rayleigh = ra;
    o.prandtl = 0.7;
    o.aspect = aspect;
    o.dt = dt;
    return o;
  }
  static RayleighBenardSolverOptions options_2d(int64_t nx, int64_t nz, double ra, double aspect,
                                                double dt) {
    RayleighBenardSolverOptions o;
    o.nx = nx;
    o.nz = nz;
    o.rayleigh = ra;
    o.prandtl = 0.7;
    o.aspect = aspect;
    o.dt = dt;
    return o;
  }
  // Spectral d/d(dimension `dim`) of a periodic field of period `aspect`.
  static at::Tensor ddh(const at::Tensor& f, int64_t dim, double aspect) {
    const int64_t n = f.size(dim);
    const at::Tensor m = at::arange(n / 2 + 1, at::kDouble);
    at::Tensor k = m * (2 * kPi / aspect);
    k.select(0, n / 2).zero_();  // the Nyquist mode has no derivative
    std::vector<int64_t> shape(static_cast<size_t>(f.dim()), 1);
    shape[static_cast<size_t>(dim)] = n / 2 + 1;
    const at::Tensor ik = at::complex(at::zeros_like(k), k).view(shape);
    return at::fft_irfft(ik * at::fft_rfft(f, c10::nullopt, dim), n, dim);
  }
  // The field's Fourier modes that the 2/3 rule keeps in x and y (the solver evolves the
  // equations projected onto them: the products' higher modes are dropped every step).
  static at::Tensor dealiased(const at::Tensor& f) {
    const int64_t nx = f.size(0), ny = f.size(1);
    const at::Tensor a = at::arange(nx, at::kDouble);
    const at::Tensor mx = at::minimum(a, static_cast<double>(nx) - a);
    const at::Tensor my = at::arange(ny / 2 + 1, at::kDouble);
    const at::Tensor keep = at::logical_and((mx * 3.0 < static_cast<double>(nx)).view({nx, 1, 1}),
                                            (my * 3.0 < static_cast<double>(ny)).view({1, -1, 1}));
    const at::Tensor hat = at::fft_rfftn(f, c10::nullopt, at::IntArrayRef{0, 1});
    return at::fft_irfftn(hat * keep, at::IntArrayRef{nx, ny}, at::IntArrayRef{0, 1});
  }
  static at::Tensor ddz(const at::Tensor& f) {
    return at::matmul(f, (-2.0 * chebyshev_diff_matrix(f.size(-1))).t());
  }
  static double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

  // Growth rate of the kinetic energy's square root between t1 and t2 on a box whose (1, 1)
  // wavevector has |k| = 3.117.
  static double oblique_growth_rate(double ra) {
    const double aspect = 2 * kPi * std::sqrt(2.0) / 3.117;
    const RayleighBenard3dSolver s(options(8, 8, 24, ra, aspect, 0.5));
    Rbc3dState st = s.initial_state(1e-5, 7);
    double e1 = 0.0, t1 = 0.0;
    for (int i = 1; i <= 1200; ++i) {
      s.step(&st);
      if (i == 600) {
        e1 = s.diagnostics(st).kinetic_energy;
        t1 = st.time;
      }
    }
    return std::log(s.diagnostics(st).kinetic_energy / e1) / (2.0 * (st.time - t1));
  }
};

// A 2-D buoyancy state (rfft modes along its x) as a 3-D one constant along the other axis.
Rbc3dState embed(const RbcState& s2, int64_t nx, int64_t ny, bool along_x) {
  const int64_t nyh = ny / 2 + 1, ni = s2.theta.size(1);
  at::Tensor theta = at::zeros({nx, nyh, ni}, at::kComplexDouble);
  if (along_x) {  // varies in x, constant in y: rows (a, 0), a = 0 .. nx-1 (full spectrum)
    for (int64_t a = 0; a < nx; ++a)
      theta[a][0] = a <= nx / 2 ? s2.theta[a] * static_cast<double>(ny)
                                : s2.theta[nx - a].conj() * static_cast<double>(ny);
  } else {  // varies in y, constant in x: rows (0, b), b = 0 .. ny/2
    theta[0] = s2.theta * static_cast<double>(nx);
  }
  Rbc3dState s3;
  s3.theta = theta.reshape({nx * nyh, ni});
  s3.w = at::zeros_like(s3.theta);
  s3.eta = at::zeros_like(s3.theta);
  return s3;
}

TEST_F(FnoRayleighBenard3d, MatchesTheTwoDimensionalSolverOnFlowsInvariantAlongOneAxis) {
  const double aspect = 2.0, ra = 2e4, dt = 0.05;
  const int64_t n = 16, nz = 25, thin = 4;
  const RayleighBenardSolver s2(options_2d(n, nz, ra, aspect, dt));
  RbcState st2 = s2.initial_state(0.5, 5);
  const RayleighBenard3dSolver along_x(options(n, thin, nz, ra, aspect, dt));
  const RayleighBenard3dSolver along_y(options(thin, n, nz, ra, aspect, dt));
  Rbc3dState sx = embed(st2, n, thin, true), sy = embed(st2, thin, n, false);
  for (int i = 0; i < 60; ++i) {  // t = 3: the rolls grow well into the nonlinear range
    s2.step(&st2);
    along_x.step(&sx);
    along_y.step(&sy);
  }
  const at::Tensor f2 = s2.fields(st2);  // (4, n, nz): u_x, u_z, b, p
  ASSERT_GT(max_abs(f2[0]), 1e-2) << "the flow must have grown for the comparison to mean much";
  const at::Tensor fx = along_x.fields(sx), fy = along_y.fields(sy);  // (5, ., ., nz)
  // Both forms are spectrally accurate; they differ only in where the products are truncated
  // (curl of the truncated u.grad u here, the truncated u.grad omega there): 1.9e-7 in p here,
  // 1.3e-5 at nz = 17 (it falls as the z resolution grows, as a truncation error does).
  const double tol = 1e-6;
  for (int64_t j = 0; j < thin; ++j) {
    const at::Tensor x_slice = fx.select(2, j), y_slice = fy.select(1, j);
    test::expect_close(x_slice[0], f2[0], tol, "u_x (y-invariant) vs 2-D u_x");
    test::expect_close(x_slice[1], at::zeros_like(f2[0]), tol, "u_y (y-invariant)");
    test::expect_close(x_slice[2], f2[1], tol, "u_z (y-invariant) vs 2-D u_z");
    test::expect_close(x_slice[3], f2[2], tol, "b (y-invariant) vs 2-D b");
    test::expect_close(x_slice[4], f2[3], tol, "p (y-invariant) vs 2-D p");
    test::expect_close(y_slice[0], at::zeros_like(f2[0]), tol, "u_x (x-invariant)");
    test::expect_close(y_slice[1], f2[0], tol, "u_y (x-invariant) vs 2-D u_x");
    test::expect_close(y_slice[2], f2[1], tol, "u_z (x-invariant) vs 2-D u_z");
    test::expect_close(y_slice[3], f2[2], tol, "b (x-invariant) vs 2-D b");
    test::expect_close(y_slice[4], f2[3], tol, "p (x-invariant) vs 2-D p");
  }
}

TEST_F(FnoRayleighBenard3d, ConvectionSetsInAtTheCriticalRayleighNumberOnAnObliqueWavevector) {
  const double below = oblique_growth_rate(1650.0), above = oblique_growth_rate(1770.0);
  EXPECT_LT(below, 0.0) << "Ra 1650 < 1708 must decay";
  EXPECT_GT(above, 0.0) << "Ra 1770 > 1708 must grow";
  const double ra_c = 1650.0 + (1770.0 - 1650.0) * (-below) / (above - below);
  EXPECT_NEAR(ra_c, 1707.76, 0.01 * 1707.76) << "growth rates " << below << " and " << above;
}

TEST_F(FnoRayleighBenard3d, BelowOnsetDecaysToTheConductiveState) {
  const RayleighBenard3dSolver s(options(8, 8, 13, 1000.0, 2.0, 0.5));
  Rbc3dState st = s.initial_state(0.05, 3);
  const double theta0 = s.diagnostics(st).max_abs_theta;
  ASSERT_GT(theta0, 1e-3);
  for (int i = 0; i < 600; ++i) s.step(&st);  // t = 300
  const RbcDiagnostics d = s.diagnostics(st);
  EXPECT_LT(d.max_abs_theta, 1e-6 * theta0);
  EXPECT_NEAR(d.nusselt_bottom, 1.0, 1e-6);
  EXPECT_NEAR(d.nusselt_top, 1.0, 1e-6);
  const at::Tensor f = s.fields(st), z = s.z().view({1, 1, 13}).expand({8, 8, 13});
  for (int c = 0; c < 3; ++c) test::expect_close(f[c], at::zeros_like(z), 1e-7, "velocity");
  test::expect_close(f[3], 1.0 - z, 1e-7, "b = 1 - z");
  test::expect_close(f[4], z - z * z / 2.0 - 1.0 / 3.0, 1e-7, "hydrostatic p with zero mean");
}

TEST_F(FnoRayleighBenard3d, SatisfiesTheMomentumEquationsWithTheDiagnosedPressure) {
  const double aspect = 2.0, dt = 0.004;
  const int64_t n = 16, nz = 25;
  const RayleighBenard3dSolver s(options(n, n, nz, 8e3, aspect, dt));
  Rbc3dState st = s.initial_state(0.4, 11);
  for (int i = 0; i < 500; ++i) s.step(&st);  // t = 2: a 3-D flow, u, v and w all nonzero
  const at::Tensor before = s.fields(st);
  s.step(&st);
  const at::Tensor now = s.fields(st);
  s.step(&st);
  const at::Tensor after = s.fields(st);
  const at::Tensor dudt = (after - before) / (2.0 * dt);
  const at::Tensor u = now[0], v = now[1], w = now[2], b = now[3], p = now[4];
  ASSERT_GT(max_abs(u), 1e-2);
  ASSERT_GT(max_abs(v), 1e-2);
  const double nu = s.nu(), kappa = s.kappa();
  auto dx = [&](const at::Tensor& g) { return ddh(g, 0, aspect); };
  auto dy = [&](const at::Tensor& g) { return ddh(g, 1, aspect); };
  auto lap = [&](const at::Tensor& g) { return dx(dx(g)) + dy(dy(g)) + ddz(ddz(g)); };
  auto advect = [&](const at::Tensor& g) { return u * dx(g) + v * dy(g) + w * ddz(g); };
  const std::vector<at::Tensor> residuals{
      dudt[0] + advect(u) + dx(p) - nu * lap(u), dudt[1] + advect(v) + dy(p) - nu * lap(v),
      dudt[2] + advect(w) + ddz(p) - nu * lap(w) - b, dudt[3] + advect(b) - kappa * lap(b)};
  const double scale = std::max(max_abs(ddz(p)), max_abs(dx(p)));
  ASSERT_GT(scale, 1e-2);
  // Measured: at most 2.6e-5 of `scale` (the central difference in time and the z truncation).
  const char* names[] = {"x-momentum", "y-momentum", "z-momentum", "buoyancy"};
  for (size_t i = 0; i < residuals.size(); ++i)
    test::expect_close(dealiased(residuals[i]).slice(2, 1, nz - 1),
                       at::zeros({n, n, nz - 2}, at::kDouble), 1e-4 * scale,
                       std::string(names[i]) + " residual (interior points)");
  const at::Tensor div = dx(u) + dy(v) + ddz(w);
  test::expect_close(div, at::zeros_like(div), 1e-6 * max_abs(dx(u)), "div u");
}

TEST_F(FnoRayleighBenard3d, FieldsMeetTheWallConditions) {
  const RayleighBenard3dSolver s(options(16, 8, 17, 5e4, 4.0, 0.05));
  Rbc3dState st = s.initial_state(0.1, 9);
  for (int i = 0; i < 100; ++i) s.step(&st);
  const at::Tensor f = s.fields(st);
  ASSERT_EQ(f.sizes(), (at::IntArrayRef{5, 16, 8, 17}));
  ASSERT_GT(max_abs(f[0]), 1e-3);
  const at::Tensor zero = at::zeros({16, 8}, at::kDouble);
  for (int64_t wall : {int64_t{0}, int64_t{16}})
    for (int c = 0; c < 3; ++c)
      test::expect_close(f[c].select(2, wall), zero, 1e-13, "u at a wall");
  test::expect_close(f[3].select(2, 0), at::ones_like(zero), 1e-13, "b = 1 at the bottom");
  test::expect_close(f[3].select(2, 16), zero, 1e-13, "b = 0 at the top");
  EXPECT_LE(s.cfl(st), 1.0);
}

TEST_F(FnoRayleighBenard3d, IsSecondOrderInTime) {
  test::expect_second_order([](double dt) {
    const RayleighBenard3dSolver s(options(8, 8, 13, 1e4, 2.0, dt));
    Rbc3dState st = s.initial_state(0.3, 5);
    for (int i = 0; i < static_cast<int>(std::lround(2.0 / dt)); ++i) s.step(&st);
    return s.fields(st);
  });
}

}  // namespace
}  // namespace scaffold::fno
