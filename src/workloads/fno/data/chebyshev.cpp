// Chebyshev matrices in plain double loops (n is at most a few hundred: O(n^3) once per solver),
// copied into float64 tensors at the end. The diagonal of D uses the negative-sum trick (each row
// of D sums to zero), which keeps the rounding error of high derivatives down.
#include "workloads/fno/data/chebyshev.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/numbers.hpp"

namespace scaffold::fno {
namespace {

using core::kPi;

using Matrix = std::vector<std::vector<double>>;  // [row][column]

Matrix zeros(int64_t rows, int64_t cols) {
  return Matrix(rows, std::vector<double>(cols, 0.0));
}

Matrix multiply(const Matrix& a, const Matrix& b) {
  const std::size_t n = a.size(), k = b.size(), m = b.front().size();
  Matrix c = zeros(static_cast<int64_t>(n), static_cast<int64_t>(m));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < k; ++l) {
      const double ail = a[i][l];
      if (ail == 0.0) continue;
      for (std::size_t j = 0; j < m; ++j) c[i][j] += ail * b[l][j];
    }
  return c;
}

at::Tensor to_tensor(const Matrix& m) {
  const int64_t rows = static_cast<int64_t>(m.size()),
                cols = static_cast<int64_t>(m.front().size());
  at::Tensor t = at::empty({rows, cols}, at::kDouble);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = m[i][j];
  return t;
}

std::vector<double> points(int64_t n) {
  std::vector<double> x(n);
  const double big_n = static_cast<double>(n - 1);
  // sin form: symmetric to the last bit, so x_{N-j} == -x_j exactly.
  for (int64_t j = 0; j < n; ++j)
    x[j] = std::sin(kPi * (big_n - 2.0 * static_cast<double>(j)) / (2.0 * big_n));
  return x;
}

Matrix diff_matrix(int64_t n) {
  const std::vector<double> x = points(n);
  std::vector<double> c(n, 1.0);
  c[0] = c[n - 1] = 2.0;
  for (int64_t j = 1; j < n; j += 2) c[j] = -c[j];
  Matrix d = zeros(n, n);
  for (int64_t i = 0; i < n; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      if (i == j) continue;
      d[i][j] = (c[i] / c[j]) / (x[i] - x[j]);
      row += d[i][j];
    }
    d[i][i] = -row;
  }
  return d;
}

void check_size(int64_t n, int64_t least, const char* what) {
  if (n < least)
    throw core::Error(std::string(what) + ": a Chebyshev grid needs at least " +
                      std::to_string(least) + " points, got " + std::to_string(n));
}

}  // namespace

at::Tensor chebyshev_points(int64_t n) {
  check_size(n, 2, "chebyshev_points");
  const std::vector<double> x = points(n);
  return at::tensor(x, at::kDouble);
}

at::Tensor chebyshev_diff_matrix(int64_t n) {
  check_size(n, 2, "chebyshev_diff_matrix");
  return to_tensor(diff_matrix(n));
}

ClampedOperators clamped_operators(int64_t n) {
  check_size(n, 4, "clamped_operators");
  const std::vector<double> x = points(n);
  const Matrix d1 = diff_matrix(n);
  const Matrix d2 = multiply(d1, d1);
  const Matrix d3 = multiply(d2, d1);
  const Matrix d4 = multiply(d3, d1);
  const int64_t ni = n - 2;
  // psi = (1 - x^2) q with q(+-1) = 0: the derivatives of psi in terms of q's interior values,
  // then q_j = psi_j / (1 - x_j^2) (the column scaling).
  Matrix f1 = zeros(n, ni), f2 = zeros(n, ni), i2 = zeros(ni, ni), i4 = zeros(ni, ni);
  for (int64_t i = 0; i < n; ++i) {
    const double s = 1.0 - x[i] * x[i];
    for (int64_t jj = 0; jj < ni; ++jj) {
      const int64_t j = jj + 1;
      const double scale = 1.0 / (1.0 - x[j] * x[j]);
      const double delta = i == j ? 1.0 : 0.0;
      f1[i][jj] = (s * d1[i][j] - 2.0 * x[i] * delta) * scale;
      f2[i][jj] = (s * d2[i][j] - 4.0 * x[i] * d1[i][j] - 2.0 * delta) * scale;
      if (i >= 1 && i <= ni) {
        i2[i - 1][jj] = f2[i][jj];
        i4[i - 1][jj] = (s * d4[i][j] - 8.0 * x[i] * d3[i][j] - 12.0 * d2[i][j]) * scale;
      }
    }
  }
  return ClampedOperators{to_tensor(f1), to_tensor(f2), to_tensor(i2), to_tensor(i4)};
}

at::Tensor chebyshev_interpolation_matrix(int64_t n, int64_t m) {
  check_size(n, 2, "chebyshev_interpolation_matrix");
  check_size(m, 2, "chebyshev_interpolation_matrix");
  const std::vector<double> x = points(n), y = points(m);
  std::vector<double> w(n);  // barycentric weights of the Lobatto points
  for (int64_t j = 0; j < n; ++j)
    w[j] = ((j % 2 == 0) ? 1.0 : -1.0) * ((j == 0 || j == n - 1) ? 0.5 : 1.0);
  Matrix p = zeros(m, n);
  for (int64_t i = 0; i < m; ++i) {
    int64_t hit = -1;
    for (int64_t j = 0; j < n; ++j)
      if (y[i] == x[j]) hit = j;
    if (hit >= 0) {
      p[i][hit] = 1.0;
      continue;
    }
    double total = 0.0;
    for (int64_t j = 0; j < n; ++j) total += w[j] / (y[i] - x[j]);
    for (int64_t j = 0; j < n; ++j) p[i][j] = (w[j] / (y[i] - x[j])) / total;
  }
  return to_tensor(p);
}

at::Tensor chebyshev_projection_matrix(int64_t n, int64_t m) {
  check_size(n, 2, "chebyshev_projection_matrix");
  if (m < n) throw core::Error("chebyshev_projection_matrix: the fine grid must not be coarser");
  const double big_m = static_cast<double>(m - 1), big_n = static_cast<double>(n - 1);
  // Fine values -> Chebyshev coefficients (discrete cosine transform of type I) -> the first n
  // modes evaluated at the coarse points.
  Matrix coeff = zeros(n, m);  // [mode k][fine point j]
  for (int64_t k = 0; k < n; ++k) {
    const double ck = (k == 0 || k == m - 1) ? 2.0 : 1.0;
    for (int64_t j = 0; j < m; ++j) {
      const double cj = (j == 0 || j == m - 1) ? 2.0 : 1.0;
      coeff[k][j] = 2.0 / (big_m * ck * cj) * std::cos(kPi * static_cast<double>(j * k) / big_m);
    }
  }
  Matrix eval = zeros(n, n);  // [coarse point i][mode k]
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) eval[i][k] = std::cos(kPi * static_cast<double>(i * k) / big_n);
  return to_tensor(multiply(eval, coeff));
}

at::Tensor clenshaw_curtis_weights(int64_t n) {
  check_size(n, 2, "clenshaw_curtis_weights");
  const int64_t big_n = n - 1;
  const double nn = static_cast<double>(big_n);
  std::vector<double> w(n, 0.0);
  if (big_n == 1) return at::tensor(std::vector<double>{1.0, 1.0}, at::kDouble);
  for (int64_t j = 1; j < big_n; ++j) {
    const double theta = kPi * static_cast<double>(j) / nn;
    double v = 1.0;
    if (big_n % 2 == 0) {
      for (int64_t k = 1; k < big_n / 2; ++k)
        v -= 2.0 * std::cos(2.0 * k * theta) / (4.0 * k * k - 1.0);
      v -= std::cos(nn * theta) / (nn * nn - 1.0);
    } else {
      for (int64_t k = 1; k <= (big_n - 1) / 2; ++k)
        v -= 2.0 * std::cos(2.0 * k * theta) / (4.0 * k * k - 1.0);
    }
    w[j] = 2.0 * v / nn;
  }
  w[0] = w[big_n] = big_n % 2 == 0 ? 1.0 / (nn * nn - 1.0) : 1.0 / (nn * nn);
  return at::tensor(w, at::kDouble);
}

}  // namespace scaffold::fno
