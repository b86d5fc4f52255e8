// Fourier helpers of the periodic solvers: integer wavenumbers in FFT order, 2/3-rule masks, and
// the exponential time differencing Runge-Kutta scheme of order 4 (Cox & Matthews 2002) with
// its coefficients evaluated by contour integrals (Kassam & Trefethen 2005), for
// v' = L v + N(v) with L diagonal in Fourier space. Everything float64 / complex128; the
// time stepper knows nothing about the PDE it advances.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace scaffold::fno {

// 0, 1, ..., n/2 - 1, -n/2, ..., -1 (numpy.fft.fftfreq(n) * n). (n) float64.
at::Tensor fft_wavenumbers(int64_t n);
// 0, 1, ..., n/2 (numpy.fft.rfftfreq(n) * n). (n/2 + 1) float64.
at::Tensor rfft_wavenumbers(int64_t n);
// 1 where |k| < n/3 (the 2/3 rule: quadratic products of the kept modes do not alias onto them),
// else 0; same shape as k.
at::Tensor dealias_mask(const at::Tensor& k, int64_t n);

// ETDRK4 for a diagonal linear part L (real, any shape) and step h.
class Etdrk4 {
 public:
  // `nonlinear(v_hat)` returns N(v) in Fourier space, shaped like v_hat. `contour_points`:
  // points on the circle of radius 1 around each h L for the phi-function integrals.
  Etdrk4(const at::Tensor& L, double h, std::function<at::Tensor(const at::Tensor&)> nonlinear,
         int contour_points = 32);
  // One step of v_hat (complex, broadcastable with L).
  at::Tensor step(const at::Tensor& v_hat) const;
  double h() const { return h_; }

 private:
  double h_;
  std::function<at::Tensor(const at::Tensor&)> nonlinear_;
  at::Tensor e_, e2_, q_, f1_, f2_, f3_;  // real, shaped like L
};

}  // namespace scaffold::fno
