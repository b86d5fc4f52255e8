// Navier-Stokes against exact solutions and an independent integrator: a Fourier mode (and a
// pair of modes of equal |k|, which exercises the advection's cancellation) decays as
// exp(-nu 4 pi^2 |k|^2 t); the forcing from rest gives f (1 - e^{-lambda t}) / lambda; the
// velocity is divergence-free; inviscid dealiased flow conserves energy and enstrophy; and a GRF
// field after t = 0.5 matches numpy RK4 at dt 1e-4 (tests/unit/workloads/fno/ns_reference.py).
#include <gtest/gtest.h>

#include <cmath>

#include "core/npy.hpp"
#include "test_util.hpp"
#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/grf.hpp"
#include "workloads/fno/data/navier_stokes.hpp"

namespace scaffold::fno {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct FnoNavierStokes : test::SingleThreaded {
  static at::Tensor grid(int64_t n) { return at::arange(n, at::kDouble) / static_cast<double>(n); }
  // sin(2 pi (kx x + ky y) + phase) on the n x n grid.
  static at::Tensor mode(int64_t n, int kx, int ky, double phase = 0.0) {
    const at::Tensor x = grid(n);
    return at::sin(2 * kPi * (kx * x.unsqueeze(1) + ky * x.unsqueeze(0)) + phase);
  }
};

TEST_F(FnoNavierStokes, AFourierModeDecaysAtTheViscousRate) {
  const double nu = 1e-2, t = 1.0;
  const NavierStokesSolver solver({32, nu, 0.05, 0.0});
  const at::Tensor w0 = mode(32, 2, 3, 0.3);
  const at::Tensor w = solver.advance(w0, 20);
  const double rate = nu * 4 * kPi * kPi * 13;  // |k|^2 = 2^2 + 3^2
  const double ratio = w.abs().max().item<double>() / w0.abs().max().item<double>();
  EXPECT_NEAR(ratio / std::exp(-rate * t), 1.0, 1e-10);
  test::expect_close(w, w0 * std::exp(-rate * t), 1e-10, "w(t) = exp(-nu 4 pi^2 |k|^2 t) w0");
  // Two modes of the same |k| = 5 ((3, 4) and (5, 0)): u.grad w vanishes only by cancellation.
  const at::Tensor pair = mode(32, 3, 4) + 0.7 * mode(32, 5, 0, 1.0);
  const at::Tensor pair_t = solver.advance(pair, 20);
  test::expect_close(pair_t, pair * std::exp(-nu * 4 * kPi * kPi * 25 * t), 1e-10,
                     "two modes of |k| = 5");
}

TEST_F(FnoNavierStokes, TheForcingDrivesItsOwnModeFromRest) {
  // f = a (sin 2pi(x+y) + cos 2pi(x+y)) is a steady Euler solution, so from w = 0 exactly
  // w(t) = f (1 - e^{-lambda t}) / lambda with lambda = nu 4 pi^2 * 2.
  const double nu = 1e-3, a = 0.1;
  const NavierStokesSolver solver({32, nu, 0.1, a});
  const at::Tensor w = solver.advance(at::zeros({32, 32}, at::kDouble), 100);  // t = 10
  const double lambda = nu * 8 * kPi * kPi;
  const at::Tensor x = grid(32), s = x.unsqueeze(1) + x.unsqueeze(0);
  const at::Tensor f = a * (at::sin(2 * kPi * s) + at::cos(2 * kPi * s));
  test::expect_close(solver.forcing(), f, 1e-15, "forcing");
  test::expect_close(w, f * (1 - std::exp(-lambda * 10.0)) / lambda, 1e-11,
                     "forced mode at t = 10");
}

TEST_F(FnoNavierStokes, VelocityIsDivergenceFree) {
  const NavierStokesSolver solver({64, 1e-3, 1e-2, 0.1});
  const at::Tensor w = grf_2d(64, GrfOptions{343.0, 7.0, 2.5}, 11);
  const auto [u, v] = solver.velocity(w);
  const double scale = (u.abs() + v.abs()).max().item<double>();
  ASSERT_GT(scale, 1e-3);
  const double div = solver.divergence(u, v).abs().max().item<double>();
  EXPECT_LT(div / scale, 1e-10) << "max |div u| " << div << " relative to max |u| " << scale;
  // And the velocity reproduces the vorticity: w = v_x - u_y (spectrally).
  const at::Tensor k = at::arange(64, at::kDouble);
  const at::Tensor kk = at::where(k < 32, k, k - 64);
  const at::Tensor kx = kk.unsqueeze(1), ky = kk.unsqueeze(0);
  const at::Tensor curl =
      at::real(at::fft_ifft2(at::complex(at::zeros_like(kx * ky), 2 * kPi * kx) * at::fft_fft2(v) -
                             at::complex(at::zeros_like(kx * ky), 2 * kPi * ky) * at::fft_fft2(u)));
  test::expect_close(curl, w, 1e-12 * w.abs().max().item<double>(), "v_x - u_y = w");
}

TEST_F(FnoNavierStokes, InviscidFlowConservesEnergyAndEnstrophy) {
  // Keep only the 2/3-rule modes so the truncated system is closed; then the semi-discrete
  // dynamics conserve both, and ETDRK4 errs by O(dt^4) only.
  const int64_t n = 32;
  const NavierStokesSolver solver({n, 0.0, 1e-2, 0.0});
  const at::Tensor k = at::arange(n, at::kDouble);
  const at::Tensor kk = at::where(k < n / 2, k, k - n).abs() * 3 < n;
  const at::Tensor keep = (kk.unsqueeze(1) & kk.unsqueeze(0)).to(at::kDouble);
  const at::Tensor w0 =
      at::real(at::fft_ifft2(at::fft_fft2(grf_2d(n, GrfOptions{343.0, 7.0, 2.5}, 3)) * keep));
  auto energy = [&](const at::Tensor& w) {
    const auto [u, v] = solver.velocity(w);
    return (u * u + v * v).mean().item<double>();
  };
  auto enstrophy = [](const at::Tensor& w) { return (w * w).mean().item<double>(); };
  const at::Tensor w = solver.advance(w0, 200);  // t = 2
  EXPECT_GT((w - w0).abs().max().item<double>(), 1e-2 * w0.abs().max().item<double>())
      << "the flow should evolve";
  EXPECT_NEAR(energy(w) / energy(w0), 1.0, 1e-9);
  EXPECT_NEAR(enstrophy(w) / enstrophy(w0), 1.0, 1e-9);
}

TEST_F(FnoNavierStokes, MatchesAnIndependentNumpyIntegrator) {
  scaffold::test::TempDir dir;
  const int64_t n = 32;
  const at::Tensor w0 =
      grf_2d(n, GrfOptions{343.0, 7.0, 2.5}, 21) * 20.0;  // strong enough to be nonlinear
  core::write_npy(dir.path() / "w0.npy", core::DType::Float64, {n, n},
                  w0.contiguous().data_ptr<double>());
  const auto r = scaffold::test::run_command(
      std::string(SCAFFOLD_PYTHON) + " " + SCAFFOLD_SOURCE_DIR +
      "/tests/unit/workloads/fno/ns_reference.py " + (dir.path() / "w0.npy").string() + " " +
      (dir.path() / "ref.npy").string() + " 1e-3 0.1 0.5 1e-4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<int64_t> shape;
  std::vector<double> ref = core::read_npy<double>(dir.path() / "ref.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{n, n}));
  const NavierStokesSolver solver({n, 1e-3, 1e-3, 0.1});
  const at::Tensor w = solver.advance(w0, 500);
  const at::Tensor expected = at::tensor(ref, at::kDouble).reshape({n, n});
  EXPECT_GT((expected - w0).abs().max().item<double>(), 0.05 * w0.abs().max().item<double>())
      << "nonlinear enough";
  test::expect_close(w, expected, 1e-8 * w0.abs().max().item<double>(), "w(0.5) against numpy RK4");
}

TEST_F(FnoNavierStokes, ReportsTheCflNumber) {
  const NavierStokesSolver solver({32, 1e-3, 0.01, 0.0});
  const at::Tensor w =
      mode(32, 1, 0);  // psi = w / (4 pi^2): u = 0, v = -psi_x = -cos(2 pi x) / (2 pi)
  EXPECT_NEAR(solver.cfl(w), 0.01 * 32 / (2 * kPi), 1e-12);
}

}  // namespace
}  // namespace scaffold::fno
