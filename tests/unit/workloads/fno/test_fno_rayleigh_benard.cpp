// Rayleigh-Benard against what no-slip convection must do: the onset of convection at the
// critical Rayleigh number 1707.76 (at wavenumber 3.117; Reid & Harris 1958) from the growth
// rates just below and above it, decay to the conductive state below onset (b = 1 - z, no flow,
// hydrostatic pressure z - z^2/2 - 1/3), steady convection at Ra 1e4 with the Nusselt number
// above 1 and equal at both walls and in the volume, the momentum equations satisfied by the
// diagnosed pressure, the wall conditions, a divergence-free velocity and second order in time.
#include <gtest/gtest.h>

#include <cmath>

#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/chebyshev.hpp"
#include "workloads/fno/data/rayleigh_benard.hpp"

namespace scaffold::fno {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct FnoRayleighBenard : test::SingleThreaded {
  static RayleighBenardSolverOptions options(int64_t nx, int64_t nz, double ra, double aspect,
                                             double dt) {
    RayleighBenardSolverOptions o;
    o.nx = nx;
    o.nz = nz;
    o.rayleigh = ra;
    o.prandtl = 1.0;
    o.aspect = aspect;
    o.dt = dt;
    return o;
  }
  // d/dx (spectral, along dimension 0 of (nx, nz)) and d/dz (Chebyshev, dimension 1).
  static at::Tensor ddx(const at::Tensor& f, double aspect) {
    const int64_t nx = f.size(0);
    const at::Tensor k = at::arange(nx / 2 + 1, at::kDouble) * (2 * kPi / aspect);
    const at::Tensor ik = at::complex(at::zeros_like(k), k).unsqueeze(1);
    return at::fft_irfft(ik * at::fft_rfft(f, c10::nullopt, 0), nx, 0);
  }
  static at::Tensor ddz(const at::Tensor& f) {
    return at::matmul(f, (-2.0 * chebyshev_diff_matrix(f.size(1))).t());
  }

  // Growth rate of the kinetic energy's square root between t1 and t2.
  static double growth_rate(double ra) {
    const RayleighBenardSolver s(options(8, 24, ra, 2 * kPi / 3.117, 0.5));
    RbcState st = s.initial_state(1e-5, 7);
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

TEST_F(FnoRayleighBenard, ConvectionSetsInAtTheCriticalRayleighNumber) {
  const double below = growth_rate(1650.0), above = growth_rate(1770.0);
  EXPECT_LT(below, 0.0) << "Ra 1650 < 1708 must decay";
  EXPECT_GT(above, 0.0) << "Ra 1770 > 1708 must grow";
  const double ra_c =
      1650.0 + (1770.0 - 1650.0) * (-below) / (above - below);  // linear in Ra near onset
  EXPECT_NEAR(ra_c, 1707.76, 0.01 * 1707.76) << "growth rates " << below << " and " << above;
}

TEST_F(FnoRayleighBenard, BelowOnsetDecaysToTheConductiveState) {
  const RayleighBenardSolver s(options(16, 17, 1000.0, 2.0, 0.5));
  RbcState st = s.initial_state(0.05, 3);
  const double theta0 = s.diagnostics(st).max_abs_theta;
  ASSERT_GT(theta0, 1e-3);
  for (int i = 0; i < 600; ++i) s.step(&st);  // t = 300
  const RbcDiagnostics d = s.diagnostics(st);
  EXPECT_LT(d.max_abs_theta, 1e-6 * theta0);
  EXPECT_NEAR(d.nusselt_bottom, 1.0, 1e-6);
  EXPECT_NEAR(d.nusselt_top, 1.0, 1e-6);
  const at::Tensor f = s.fields(st), z = s.z().unsqueeze(0).expand({16, 17});
  test::expect_close(f[0], at::zeros_like(z), 1e-7, "u_x");
  test::expect_close(f[1], at::zeros_like(z), 1e-7, "u_z");
  test::expect_close(f[2], 1.0 - z, 1e-7, "b = 1 - z");
  test::expect_close(f[3], z - z * z / 2.0 - 1.0 / 3.0, 1e-7, "hydrostatic p with zero mean");
}

TEST_F(FnoRayleighBenard, AboveOnsetConvectsWithNusseltAboveOne) {
  const double aspect = 2.0;
  const RayleighBenardSolver s(options(32, 25, 1e4, aspect, 0.05));
  RbcState st = s.initial_state(1e-2, 3);
  for (int i = 0; i < 3000; ++i) s.step(&st);  // t = 150: steady rolls
  const RbcDiagnostics d = s.diagnostics(st);
  EXPECT_GT(d.nusselt_bottom, 1.5);
  EXPECT_NEAR(d.nusselt_top / d.nusselt_bottom, 1.0, 1e-4);
  EXPECT_NEAR(d.nusselt_volume / d.nusselt_bottom, 1.0, 1e-3);
  EXPECT_GT(d.kinetic_energy, 1e-3);

  // Steady state: both momentum equations hold with the diagnosed pressure (interior points).
  const at::Tensor f = s.fields(st);
  const at::Tensor u = f[0], w = f[1], b = f[2], p = f[3];
  const double nu = s.nu();
  auto lap = [&](const at::Tensor& g) { return ddx(ddx(g, aspect), aspect) + ddz(ddz(g)); };
  const at::Tensor rx = -(u * ddx(u, aspect) + w * ddz(u)) - ddx(p, aspect) + nu * lap(u);
  const at::Tensor rz = -(u * ddx(w, aspect) + w * ddz(w)) - ddz(p) + nu * lap(w) + b;
  const at::Tensor zero = at::zeros({32, 23}, at::kDouble);
  test::expect_close(rx.slice(1, 1, 24), zero, 2e-3, "x-momentum residual");
  test::expect_close(rz.slice(1, 1, 24), zero, 2e-3, "z-momentum residual");
  EXPECT_GT(ddz(p).abs().max().item<double>(), 0.1) << "the residuals are small against the terms";
  // u = psi_z, w = -psi_x: divergence-free as polynomials; on the output grid only the
  // interpolation error of differentiating w (degree nz + 1) on nz points remains.
  const at::Tensor div = ddx(u, aspect) + ddz(w);
  const double grad = ddx(u, aspect).abs().max().item<double>();
  test::expect_close(div, at::zeros_like(div), 1e-6 * grad, "div u at steady state");
}

TEST_F(FnoRayleighBenard, FieldsMeetTheWallConditionsAndAreDivergenceFree) {
  const double aspect = 4.0;
  const RayleighBenardSolver s(options(32, 17, 5e4, aspect, 0.05));
  RbcState st = s.initial_state(0.1, 9);
  for (int i = 0; i < 200; ++i) s.step(&st);
  const at::Tensor f = s.fields(st);
  ASSERT_EQ(f.sizes(), (at::IntArrayRef{4, 32, 17}));
  const double scale = f[0].abs().max().item<double>();
  ASSERT_GT(scale, 1e-3);
  for (int64_t wall : {int64_t{0}, int64_t{16}}) {
    test::expect_close(f[0].select(1, wall), at::zeros({32}, at::kDouble), 1e-13, "u_x at a wall");
    test::expect_close(f[1].select(1, wall), at::zeros({32}, at::kDouble), 1e-13, "u_z at a wall");
  }
  test::expect_close(f[2].select(1, 0), at::ones({32}, at::kDouble), 1e-13, "b = 1 at the bottom");
  test::expect_close(f[2].select(1, 16), at::zeros({32}, at::kDouble), 1e-13, "b = 0 at the top");
}

TEST_F(FnoRayleighBenard, IsSecondOrderInTime) {
  test::expect_second_order([](double dt) {
    const RayleighBenardSolver s(options(16, 17, 1e4, 2.0, dt));
    RbcState st = s.initial_state(0.2, 5);
    for (int i = 0; i < static_cast<int>(std::lround(4.0 / dt)); ++i) s.step(&st);
    return s.fields(st);
  });
}

}  // namespace
}  // namespace scaffold::fno
