// The numerical building blocks against exact results: Chebyshev differentiation of polynomials
// and of clamped functions (derivatives written out by hand), interpolation and its projection,
// Clenshaw-Curtis quadrature, ETDRK4 on linear problems with known solutions, and the Gaussian
// random fields' covariance (sample variances of the Fourier modes against the stated eigenvalues).
#include <gtest/gtest.h>

#include <cmath>

#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/chebyshev.hpp"
#include "workloads/fno/data/grf.hpp"
#include "workloads/fno/data/spectral.hpp"

namespace scaffold::fno {
namespace {

using test::expect_close;
constexpr double kPi = 3.14159265358979323846;

struct FnoNumerics : test::SingleThreaded {};

TEST_F(FnoNumerics, ChebyshevPointsAndDerivativeOfPolynomials) {
  const int64_t n = 13;  // degree 12
  const at::Tensor x = chebyshev_points(n);
  for (int64_t j = 0; j < n; ++j)
    EXPECT_NEAR(x[j].item<double>(), std::cos(kPi * j / (n - 1)), 1e-15);
  const at::Tensor d = chebyshev_diff_matrix(n);
  // p = x^7 - 3 x^4 + x, p' = 7 x^6 - 12 x^3 + 1: exact for degree <= 12.
  expect_close(at::matmul(d, x.pow(7) - 3 * x.pow(4) + x), 7 * x.pow(6) - 12 * x.pow(3) + 1, 1e-12,
               "D p");
  expect_close(at::matmul(at::matmul(d, d), x.pow(7)), 42 * x.pow(5), 1e-11, "D^2 x^7");
}

TEST_F(FnoNumerics, ClampedOperatorsDifferentiateFunctionsVanishingWithTheirSlope) {
  // psi = (1 - x^2)^2 x^3 = x^3 - 2 x^5 + x^7 vanishes with psi' at +-1; degree 7 <= n + 1.
  const int64_t n = 12;
  const ClampedOperators c = clamped_operators(n);
  const at::Tensor x = chebyshev_points(n);
  const at::Tensor xi = x.slice(0, 1, n - 1);
  const at::Tensor psi = xi.pow(3) - 2 * xi.pow(5) + xi.pow(7);
  auto d1 = [](const at::Tensor& t) { return 3 * t.pow(2) - 10 * t.pow(4) + 7 * t.pow(6); };
  auto d2 = [](const at::Tensor& t) { return 6 * t - 40 * t.pow(3) + 42 * t.pow(5); };
  const at::Tensor d4 = -240 * xi + 840 * xi.pow(3);
  expect_close(at::matmul(c.d1_full, psi), d1(x), 1e-11, "psi' at all points");
  expect_close(at::matmul(c.d2_full, psi), d2(x), 1e-10, "psi'' at all points");
  expect_close(at::matmul(c.d2, psi), d2(xi), 1e-10, "psi'' at the interior");
  expect_close(at::matmul(c.d4, psi), d4, 1e-7, "psi'''' at the interior");
}

TEST_F(FnoNumerics, InterpolationIsExactAndProjectionUndoesIt) {
  const int64_t n = 9, m = 14;
  const at::Tensor x = chebyshev_points(n), y = chebyshev_points(m);
  const at::Tensor interp = chebyshev_interpolation_matrix(n, m);
  auto p = [](const at::Tensor& t) {
    return 2 * t.pow(8) - t.pow(5) + 0.5 * t - 3;
  };  // degree 8 = n - 1
  expect_close(at::matmul(interp, p(x)), p(y), 1e-12, "interpolation of a degree-8 polynomial");
  const at::Tensor proj = chebyshev_projection_matrix(n, m);
  expect_close(at::matmul(proj, interp), at::eye(n, at::kDouble), 1e-12,
               "projection o interpolation");
  // T_10 (x) = cos(10 acos x) lies beyond the coarse grid's modes: its projection is zero.
  expect_close(at::matmul(proj, at::cos(10 * at::acos(y.clamp(-1, 1)))),
               at::zeros({n}, at::kDouble), 1e-12, "projection of T_10");
}

TEST_F(FnoNumerics, ClenshawCurtisIsExactForPolynomials) {
  for (int64_t n : {9, 10}) {
    const at::Tensor w = clenshaw_curtis_weights(n), x = chebyshev_points(n);
    for (int k = 0; k < n; ++k) {
      const double exact = k % 2 == 1 ? 0.0 : 2.0 / (k + 1);
      EXPECT_NEAR((w * x.pow(k)).sum().item<double>(), exact, 1e-13) << "n " << n << ", x^" << k;
    }
  }
}

TEST_F(FnoNumerics, Etdrk4IsExactForConstantForcingAndFourthOrderOtherwise) {
  // v' = L v + c (c constant): ETDRK4 reproduces v(t) = e^{Lt} v0 + (e^{Lt} - 1)/L c exactly,
  // for stiff and for vanishing L alike.
  const at::Tensor L = test::from_vector({0.0, -1e-8, -0.5, -40.0, -2e4});
  const at::Tensor c =
      at::complex(test::from_vector({1.0, 2.0, -1.0, 3.0, 0.5}), at::zeros({5}, at::kDouble));
  const at::Tensor v0 = at::complex(test::from_vector({0.3, -0.2, 1.0, 0.0, 2.0}),
                                    test::from_vector({0, 0, 1, 0, 0}));
  const Etdrk4 stepper(L, 0.1, [c](const at::Tensor&) { return c; });
  at::Tensor v = v0;
  for (int s = 0; s < 10; ++s) v = stepper.step(v);
  const at::Tensor e = at::exp(L);  // expm1: (e^L - 1) / L loses half the digits at L = -1e-8
  const at::Tensor phi =
      at::where(L == 0, at::ones_like(L), at::expm1(L) / at::where(L == 0, at::ones_like(L), L));
  expect_close(at::view_as_real(v), at::view_as_real(e * v0 + phi * c), 1e-12, "v(1)");
  // v' = -v^2 (N = -v^2, L = 0): v(t) = v0 / (1 + v0 t); halving dt cuts the error ~16 times.
  auto error = [](double h) {
    const Etdrk4 s(at::zeros({1}, at::kDouble), h, [](const at::Tensor& u) { return -u * u; });
    at::Tensor u = at::full({1}, 1.0, at::kComplexDouble);
    for (int k = 0; k < static_cast<int>(std::lround(1.0 / h)); ++k) u = s.step(u);
    return std::abs(at::real(u).item<double>() - 0.5);
  };
  const double ratio = error(0.1) / error(0.05);
  EXPECT_GT(ratio, 12.0) << "fourth order: error ratio " << ratio << " for dt 0.1 -> 0.05";
  EXPECT_LT(ratio, 20.0);
}

TEST_F(FnoNumerics, WavenumbersAndDealiasMask) {
  expect_close(fft_wavenumbers(6), test::from_vector({0, 1, 2, -3, -2, -1}), 0, "fft order");
  expect_close(rfft_wavenumbers(6), test::from_vector({0, 1, 2, 3}), 0, "rfft order");
  // 2/3 rule on n = 12: keep |k| < 4.
  expect_close(dealias_mask(fft_wavenumbers(12), 12),
               test::from_vector({1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1}), 0, "mask");
}

// Sample variance of each drawn Fourier mode over many fields against lambda_k: with S samples
// of |c_k|^2 (exponential with mean lambda_k), the mean of S of them has relative standard error
// 1/sqrt(S); 6 standard errors is the tolerance.
TEST_F(FnoNumerics, RandomFieldsHaveTheStatedCovariance) {
  const GrfOptions grf{625.0, 5.0, 2.0};
  const int64_t n = 32, samples = 1500;
  at::Tensor power = at::zeros({n / 2 + 1}, at::kDouble);
  for (int64_t s = 0; s < samples; ++s) {
    const at::Tensor u = grf_1d(n, grf, 1000 + static_cast<uint64_t>(s));
    ASSERT_EQ(u.scalar_type(), at::kDouble);
    power += at::abs(at::fft_rfft(u) / static_cast<double>(n)).pow(2);  // |c_k|^2
  }
  power /= static_cast<double>(samples);
  const double tol = 6.0 / std::sqrt(static_cast<double>(samples));
  EXPECT_LT(power[0].item<double>(), 1e-25) << "mean zero: the constant mode is not drawn";
  EXPECT_LT(power[n / 2].item<double>(), 1e-25) << "no Nyquist mode";
  for (int64_t k = 1; k < n / 2; ++k) {
    const double lambda = 625.0 * std::pow(4 * kPi * kPi * k * k + 25.0, -2.0);
    EXPECT_NEAR(power[k].item<double>() / lambda, 1.0, tol) << "k = " << k;
  }
  // 2-D: the same for a few modes of a 16 x 16 field (alpha 2.5, tau 7, scale 343).
  const GrfOptions g2{343.0, 7.0, 2.5};
  at::Tensor p2 = at::zeros({16, 9}, at::kDouble);
  for (int64_t s = 0; s < samples; ++s)
    p2 += at::abs(at::fft_rfft2(grf_2d(16, g2, 7000 + static_cast<uint64_t>(s))) / 256.0).pow(2);
  p2 /= static_cast<double>(samples);
  for (auto [kx, ky] : {std::pair<int, int>{1, 0}, {0, 1}, {1, 1}, {-2, 3}, {3, 5}, {-7, 7}}) {
    const double lambda = 343.0 * std::pow(4 * kPi * kPi * (kx * kx + ky * ky) + 49.0, -2.5);
    EXPECT_NEAR(p2[(kx + 16) % 16][ky].item<double>() / lambda, 1.0, tol)
        << "k = (" << kx << ", " << ky << ")";
  }
  // The same key gives the same field; another key another one.
  EXPECT_TRUE(at::equal(grf_2d(16, g2, 5), grf_2d(16, g2, 5)));
  EXPECT_FALSE(at::equal(grf_2d(16, g2, 5), grf_2d(16, g2, 6)));
}

}  // namespace
}  // namespace scaffold::fno
