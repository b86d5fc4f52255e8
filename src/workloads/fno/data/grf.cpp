// The fields are assembled as half spectra (the rfft layout) with the conjugate partners of the
// k_y = 0 column written out, then transformed with irfft: n^d irfft(c) = sum_k c_k e^{2 pi i k.x}.
// Draw order is fixed (k_y = 0 column by increasing k_x, then columns k_y = 1 .. n/2-1, each by
// FFT-ordered k_x), so a key always gives the same field.
#include "workloads/fno/data/grf.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <complex>
#include <vector>

#include "core/error.hpp"
#include "core/numbers.hpp"

namespace scaffold::fno {
namespace {

using core::kPi;

void check_grid(int64_t n, const char* what) {
  if (n < 4 || n % 2 != 0)
    throw core::Error(std::string(what) + ": the grid must be even and >= 4, got " +
                      std::to_string(n));
}

// xi with E|xi|^2 = 1: real and imaginary parts N(0, 1/2).
std::complex<double> complex_normal(NormalStream& normals) {
  const double re = normals.next(), im = normals.next();
  return {re * std::sqrt(0.5), im * std::sqrt(0.5)};
}

}  // namespace

double NormalStream::next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = 0.0;
  do {
    u1 = rng_.uniform01();
  } while (u1 <= 0.0);
  const double u2 = rng_.uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * kPi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * kPi * u2);
}

double grf_eigenvalue(const GrfOptions& grf, double k2) {
  return grf.scale * std::pow(4.0 * kPi * kPi * k2 + grf.tau * grf.tau, -grf.alpha);
}

at::Tensor grf_1d(int64_t n, const GrfOptions& grf, uint64_t stream) {
  check_grid(n, "grf_1d");
  NormalStream normals(stream);
  const int64_t half = n / 2 + 1;
  std::vector<std::complex<double>> c(static_cast<std::size_t>(half), 0.0);
  for (int64_t k = 1; k < n / 2; ++k) {
    const double k2 = static_cast<double>(k * k);
    c[k] = std::sqrt(grf_eigenvalue(grf, k2)) * complex_normal(normals);
  }
  const at::Tensor spectrum =
      at::from_blob(c.data(), {half}, at::TensorOptions().dtype(at::kComplexDouble)).clone();
  return at::fft_irfft(spectrum, n) * static_cast<double>(n);
}

at::Tensor grf_2d(int64_t n, const GrfOptions& grf, uint64_t stream) {
  check_grid(n, "grf_2d");
  NormalStream normals(stream);
  const int64_t half = n / 2 + 1;
  std::vector<std::complex<double>> c(static_cast<std::size_t>(n * half), 0.0);  // [kx][ky]
  auto at_mode = [&](int64_t kx, int64_t ky) -> std::complex<double>& {
    return c[static_cast<std::size_t>(((kx % n + n) % n) * half + ky)];
  };
  auto lambda = [&](int64_t kx, int64_t ky) {
    return grf_eigenvalue(grf, static_cast<double>(kx * kx + ky * ky));
  };
  // k_y = 0: k_x = 1 .. n/2-1 drawn, -k_x its conjugate.
  for (int64_t kx = 1; kx < n / 2; ++kx) {
    const std::complex<double> v = std::sqrt(lambda(kx, 0)) * complex_normal(normals);
    at_mode(kx, 0) = v;
    at_mode(-kx, 0) = std::conj(v);
  }
  // k_y = 1 .. n/2-1: every k_x but the Nyquist row; the conjugates are implied by the rfft layout.
  for (int64_t ky = 1; ky < n / 2; ++ky)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t kx = i < n / 2 ? i : i - n;
      if (i == n / 2) continue;
      at_mode(kx, ky) = std::sqrt(lambda(kx, ky)) * complex_normal(normals);
    }
  const at::Tensor spectrum =
      at::from_blob(c.data(), {n, half}, at::TensorOptions().dtype(at::kComplexDouble)).clone();
  return at::fft_irfft2(spectrum, at::IntArrayRef({n, n})) * static_cast<double>(n * n);
}

}  // namespace scaffold::fno
