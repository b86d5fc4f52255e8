// Burgers against the Cole-Hopf solution: u = -2 nu phi_x / phi with phi the heat-equation
// solution from phi_0 = exp(-(1/(2 nu)) int_0^x u_0), evaluated here by trapezoidal quadrature
// of the heat kernel over the real line (phi_0 periodic), independently of any FFT. Tolerances:
// 1e-9 at nu = 0.1 on 256 points and 1e-6 at nu = 0.02 on 512 points (the front is 25 times
// thinner); both far above the quadrature error (< 1e-13) and far below any scheme bug.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/burgers.hpp"

namespace scaffold::fno {
namespace {

constexpr double kPi = 3.14159265358979323846;

// u(x, t) by Cole-Hopf for u0 with antiderivative U0 (U0(0) = 0, U0 periodic: u0 has zero mean).
at::Tensor cole_hopf(const std::function<double(double)>& U0, double nu, double t, int64_t n) {
  const double s = std::sqrt(4.0 * nu * t), h = 2e-4, reach = 9.0 * s;
  std::vector<double> u(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / static_cast<double>(n);
    double phi = 0.0, phi_x = 0.0;
    for (double y = x - reach; y <= x + reach; y += h) {
      const double g = std::exp(-(x - y) * (x - y) / (s * s)) * std::exp(-U0(y) / (2.0 * nu));
      phi += g;
      phi_x += -(x - y) / (2.0 * nu * t) * g;
    }
    u[static_cast<std::size_t>(i)] = -2.0 * nu * phi_x / phi;
  }
  return at::tensor(u, at::kDouble);
}

struct FnoBurgers : test::SingleThreaded {};

TEST_F(FnoBurgers, MatchesColeHopfForASineWave) {
  const int64_t n = 256;
  const double nu = 0.1;
  const BurgersSolver solver({n, nu, 1e-3});
  const at::Tensor x = at::arange(n, at::kDouble) / static_cast<double>(n);
  const at::Tensor u0 = at::sin(2 * kPi * x);
  auto U0 = [](double y) { return (1.0 - std::cos(2 * kPi * y)) / (2 * kPi); };
  const at::Tensor half = solver.advance(u0, 500);
  test::expect_close(half, cole_hopf(U0, nu, 0.5, n), 1e-9, "u(., 0.5), nu 0.1");
  test::expect_close(solver.advance(half, 500), cole_hopf(U0, nu, 1.0, n), 1e-9, "u(., 1), nu 0.1");
}

TEST_F(FnoBurgers, MatchesColeHopfWithASteepFrontAndTwoModes) {
  const int64_t n = 512;
  const double nu = 0.02;
  const BurgersSolver solver({n, nu, 5e-4});
  const at::Tensor x = at::arange(n, at::kDouble) / static_cast<double>(n);
  const at::Tensor u0 = at::sin(2 * kPi * x) + 0.5 * at::sin(4 * kPi * x + 1.0);
  auto U0 = [](double y) {
    return (1.0 - std::cos(2 * kPi * y)) / (2 * kPi) +
           0.5 * (std::cos(1.0) - std::cos(4 * kPi * y + 1.0)) / (4 * kPi);
  };
  const at::Tensor u = solver.advance(u0, 600);  // t = 0.3: the front has steepened
  const at::Tensor expected = cole_hopf(U0, nu, 0.3, n);
  const double slope =
      (expected.roll(-1) - expected).abs().max().item<double>() * static_cast<double>(n);
  EXPECT_GT(slope, 10.0) << "the case should have a steep front (max |u_x| " << slope << ")";
  test::expect_close(u, expected, 1e-6, "u(., 0.3), nu 0.02");
}

TEST_F(FnoBurgers, BatchRowsAreIndependentAndCflIsReported) {
  const BurgersSolver solver({64, 0.1, 1e-3});
  const at::Tensor x = at::arange(64, at::kDouble) / 64.0;
  const at::Tensor a = at::sin(2 * kPi * x), b = 0.3 * at::cos(4 * kPi * x);
  const at::Tensor both = solver.advance(at::stack({a, b}), 100);
  test::expect_close(both[0], solver.advance(a, 100), 1e-15, "row 0");
  test::expect_close(both[1], solver.advance(b, 100), 1e-15, "row 1");
  EXPECT_NEAR(solver.cfl(a), 1e-3 * 1.0 * 64, 1e-12);
}

}  // namespace
}  // namespace scaffold::fno
