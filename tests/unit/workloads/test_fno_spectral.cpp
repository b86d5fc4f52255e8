// The FNO's spectral convolution against a direct DFT written here in float64 loops: the kept
// modes of rfftn (both corners of every axis but the last, the low half of the last, including a
// Nyquist column and an axis kept whole), the inverse onto the grid, and the whole convolution
// with its per-mode channel mixing, on small 1-D, 2-D and 3-D grids. Tolerance 1e-5 relative to
// the reference's largest magnitude (float32 FFTs against float64 sums). Also the parameter count
// of the paper's 1-D model and the whole model's gradients.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/dnnl_linear.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "unit/kernels/forced_bf16_products.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/fno/fno.hpp"
#include "workloads/fno/spectral.hpp"

namespace scaffold::fno {
namespace {

using cd = std::complex<double>;
using model::test::ForcedBf16Products;
using model::test::tensors_close;

constexpr double kTol = 1e-5;

struct Case {
  std::vector<int64_t> grid, modes;
};

// Row-major multi-index of flat index f over extents n.
std::vector<int64_t> unflatten(int64_t f, const std::vector<int64_t>& n) {
  std::vector<int64_t> idx(n.size());
  for (int64_t i = static_cast<int64_t>(n.size()) - 1; i >= 0; --i) {
    idx[static_cast<std::size_t>(i)] = f % n[static_cast<std::size_t>(i)];
    f /= n[static_cast<std::size_t>(i)];
  }
  return idx;
}

int64_t prod(const std::vector<int64_t>& n) {
  int64_t p = 1;
  for (int64_t v : n) p *= v;
  return p;
}

// The frequency (as an index into the full axis of n points) of kept position p: the first m
// positions are frequencies 0..m-1, the next m are n-m..n-1; on the last axis position p is p.
int64_t frequency_of(int64_t p, int64_t m, int64_t n, bool last) {
  if (last) return p;
  return p < m ? p : n - 2 * m + p;
}

// Kept modes (B, C, *K) of x (B, C, *grid) by the definition X[k] = sum_x x[x] exp(-2 pi i k.x /
// N).
std::vector<cd> direct_modes(const at::Tensor& x, const Case& c, std::vector<int64_t>* kshape) {
  const int64_t b = x.size(0), ch = x.size(1);
  *kshape = kept_mode_shape(c.modes);
  const at::Tensor xd = x.to(at::kDouble).contiguous();
  const double* xp = xd.data_ptr<double>();
  const int64_t npts = prod(c.grid), nk = prod(*kshape);
  const std::size_t d = c.grid.size();
  std::vector<cd> out(static_cast<std::size_t>(b * ch * nk));
  for (int64_t kf = 0; kf < nk; ++kf) {
    const auto kpos = unflatten(kf, *kshape);
    std::vector<int64_t> k(d);
    for (std::size_t i = 0; i < d; ++i)
      k[i] = frequency_of(kpos[i], c.modes[i], c.grid[i], i + 1 == d);
    for (int64_t xf = 0; xf < npts; ++xf) {
      const auto xi = unflatten(xf, c.grid);
      double phase = 0;
      for (std::size_t i = 0; i < d; ++i)
        phase += static_cast<double>(k[i] * xi[i]) / static_cast<double>(c.grid[i]);
      const cd e = std::exp(cd(0, -2 * M_PI * phase));
      for (int64_t bc = 0; bc < b * ch; ++bc)
        out[static_cast<std::size_t>(bc * nk + kf)] += xp[bc * npts + xf] * e;
    }
  }
  return out;
}

at::Tensor complex_tensor(const std::vector<cd>& v, std::vector<int64_t> shape) {
  at::Tensor t = at::empty(shape, at::kComplexDouble);
  auto* p = t.data_ptr<c10::complex<double>>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = c10::complex<double>(v[i].real(), v[i].imag());
  return t;
}

// y[x] = (1 / prod N) sum over kept k of w(k_last) Re(Z[k] exp(+2 pi i k.x / N)), w = 1 for the
// last axis' DC and Nyquist columns and 2 otherwise: irfftn of the zero-filled half spectrum.
at::Tensor direct_inverse(const at::Tensor& z, const Case& c) {
  const int64_t b = z.size(0), ch = z.size(1);
  const std::vector<int64_t> kshape = kept_mode_shape(c.modes);
  const at::Tensor zc = z.to(at::kComplexDouble).contiguous();
  const auto* zp = zc.data_ptr<c10::complex<double>>();
  const int64_t npts = prod(c.grid), nk = prod(kshape);
  const std::size_t d = c.grid.size();
  std::vector<int64_t> shape{b, ch};
  shape.insert(shape.end(), c.grid.begin(), c.grid.end());
  at::Tensor y = at::zeros(shape, at::kDouble);
  double* yp = y.data_ptr<double>();
  const int64_t n_last = c.grid.back();
  for (int64_t kf = 0; kf < nk; ++kf) {
    const auto kpos = unflatten(kf, kshape);
    std::vector<int64_t> k(d);
    for (std::size_t i = 0; i < d; ++i)
      k[i] = frequency_of(kpos[i], c.modes[i], c.grid[i], i + 1 == d);
    const double w = (k[d - 1] == 0 || (n_last % 2 == 0 && k[d - 1] == n_last / 2)) ? 1.0 : 2.0;
    for (int64_t xf = 0; xf < npts; ++xf) {
      const auto xi = unflatten(xf, c.grid);
      double phase = 0;
      for (std::size_t i = 0; i < d; ++i)
        phase += static_cast<double>(k[i] * xi[i]) / static_cast<double>(c.grid[i]);
      const cd e = std::exp(cd(0, 2 * M_PI * phase));
      for (int64_t bc = 0; bc < b * ch; ++bc) {
        const auto zz = zp[bc * nk + kf];
        yp[bc * npts + xf] += w * (cd(zz.real(), zz.imag()) * e).real() / static_cast<double>(npts);
      }
    }
  }
  return y;
}

at::Tensor random_input(int64_t b, int64_t c, const std::vector<int64_t>& grid) {
  std::vector<int64_t> shape{b, c};
  shape.insert(shape.end(), grid.begin(), grid.end());
  return at::randn(shape, at::kFloat);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {{16}, {5}},             // 1-D, no Nyquist
      {{16}, {9}},             // 1-D, the whole half spectrum (Nyquist included)
      {{8, 6}, {3, 3}},        // 2-D corners
      {{8, 6}, {4, 4}},        // 2-D: the corners cover axis 0, Nyquist column of axis 1
      {{6, 4, 5}, {2, 2, 3}},  // 3-D: four corners, odd last axis
  };
  return c;
}

std::string name_of(const Case& c) {
  std::string s = "grid";
  for (int64_t n : c.grid) s += " " + std::to_string(n);
  s += ", modes";
  for (int64_t m : c.modes) s += " " + std::to_string(m);
  return s;
}

TEST(FnoSpectral, KeptModesEqualTheDirectDft) {
  torch::manual_seed(1);
  for (const Case& c : cases()) {
    const at::Tensor x = random_input(2, 3, c.grid);
    std::vector<int64_t> kshape;
    const std::vector<cd> ref = direct_modes(x, c, &kshape);
    std::vector<int64_t> shape{2, 3};
    shape.insert(shape.end(), kshape.begin(), kshape.end());
    const at::Tensor expected = complex_tensor(ref, shape);
    // The FFTs and the truncated DFT products.
    for (const bool dft : {false, true}) {
      const at::Tensor got = dft ? rfft_modes_dft(x, c.modes) : rfft_modes(x, c.modes);
      EXPECT_TRUE(tensors_close(at::view_as_real(got.to(at::kComplexDouble)),
                                at::view_as_real(expected), kTol,
                                (dft ? "rfft_modes_dft, " : "rfft_modes, ") + name_of(c)));
    }
  }
}

TEST(FnoSpectral, InverseEqualsTheDirectSum) {
  torch::manual_seed(2);
  for (const Case& c : cases()) {
    std::vector<int64_t> shape{2, 2};
    for (int64_t k : kept_mode_shape(c.modes)) shape.push_back(k);
    const at::Tensor z = at::randn(shape, at::kComplexFloat);
    EXPECT_TRUE(tensors_close(irfft_modes(z, c.grid), direct_inverse(z, c), kTol,
                              "irfft_modes, " + name_of(c)));
    EXPECT_TRUE(tensors_close(irfft_modes_dft(z, c.grid), direct_inverse(z, c), kTol,
                              "irfft_modes_dft, " + name_of(c)));
  }
}

TEST(FnoSpectral, SpectralConvEqualsDirectDftMixAndInverse) {
  torch::manual_seed(3);
  using Transform = SpectralConvOptions::Transform;
  for (const bool real_mixing : {true, false})
    for (const Case& c : cases()) {
      SpectralConvOptions o;
      o.in_channels = 3;
      o.out_channels = 2;
      o.modes = c.modes;
      o.real_mixing = real_mixing;
      // The FFTs with the reference mixing, the DFT products with the real one.
      o.transform = real_mixing ? Transform::Dft : Transform::Fft;
      SpectralConv conv(o);
      const at::Tensor x = random_input(2, 3, c.grid);
      // Reference: direct DFT, the per-mode mixing written out, direct inverse.
      std::vector<int64_t> kshape;
      const std::vector<cd> xk = direct_modes(x, c, &kshape);
      const int64_t nk = prod(kshape);
      const at::Tensor w = at::view_as_complex(conv->weight.detach())
                               .to(at::kComplexDouble)
                               .contiguous();  // (Ci, Co, *K)
      const auto* wp = w.data_ptr<c10::complex<double>>();
      std::vector<cd> mixed(static_cast<std::size_t>(2 * 2 * nk));
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t oc = 0; oc < 2; ++oc)
          for (int64_t k = 0; k < nk; ++k)
            for (int64_t ic = 0; ic < 3; ++ic) {
              const auto wv = wp[(ic * 2 + oc) * nk + k];
              mixed[static_cast<std::size_t>((b * 2 + oc) * nk + k)] +=
                  xk[static_cast<std::size_t>((b * 3 + ic) * nk + k)] * cd(wv.real(), wv.imag());
            }
      std::vector<int64_t> zshape{2, 2};
      zshape.insert(zshape.end(), kshape.begin(), kshape.end());
      const at::Tensor expected = direct_inverse(complex_tensor(mixed, zshape), c);
      at::Tensor got;
      {
        torch::NoGradGuard no_grad;
        got = conv->forward(x);
      }
      EXPECT_TRUE(tensors_close(got, expected, kTol,
                                std::string("SpectralConv, ") + (real_mixing ? "real" : "complex") +
                                    " mixing, " + name_of(c)));
    }
}

// The truncated DFT products against the FFTs in float64: outputs, and the gradients of a random
// linear functional of them with respect to their inputs (the transposed products against
// LibTorch's FFT backward), within 1e-12 of the largest magnitude (the same sums, reordered).
TEST(FnoSpectral, DftProductsEqualTheFftsAndTheirGradients) {
  torch::manual_seed(12);
  for (const Case& c : cases()) {
    const at::Tensor x0 = random_input(2, 3, c.grid).to(at::kDouble);
    std::vector<int64_t> kshape{2, 3};
    for (int64_t k : kept_mode_shape(c.modes)) kshape.push_back(k);
    const at::Tensor z0 = at::randn(kshape, at::kComplexDouble);
    const at::Tensor rk = at::randn(kshape, at::kComplexDouble);  // d loss / d kept modes
    const at::Tensor rx = at::randn_like(x0);                     // d loss / d grid values
    const auto run = [&](bool dft) {
      at::Tensor x = x0.clone().requires_grad_(true), z = z0.clone().requires_grad_(true);
      const at::Tensor kept = dft ? rfft_modes_dft(x, c.modes) : rfft_modes(x, c.modes);
      const at::Tensor back = dft ? irfft_modes_dft(z, c.grid) : irfft_modes(z, c.grid);
      (at::view_as_real(kept * rk.conj()).sum() + (back * rx).sum()).backward();
      return std::vector<at::Tensor>{at::view_as_real(kept.detach()), back.detach(), x.grad(),
                                     at::view_as_real(z.grad())};
    };
    const std::vector<at::Tensor> got = run(true), want = run(false);
    const char* what[] = {"forward modes", "inverse", "forward's input gradient",
                          "inverse's input gradient"};
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(tensors_close(got[i], want[i], 1e-12, std::string(what[i]) + ", " + name_of(c)));
  }
}

TEST(FnoSpectral, TheTransformProbeMeasuresEachShapeOnceAndDecidesByItsTimes) {
  const at::Tensor x = at::randn({2, 4, 32, 16});
  const std::vector<int64_t> modes{4, 4};
  const auto lines = [] { return kernels::probe_verdicts().lines(); };
  const std::size_t before = lines().size();
  const bool verdict = dft_pays(x, modes);
  ASSERT_EQ(lines().size(), before + 1);
  const std::string line = kernels::probe_verdicts().measurements().back().line();
  const std::string head = "spectral x 2x4x32x16 Float modes 4x4: dft ";
  ASSERT_EQ(line.rfind(head, 0), 0u) << line;
  double dft_ms = 0, fft_ms = 0;
  char choice[8] = {};
  ASSERT_EQ(std::sscanf(line.c_str() + head.size(), "%lf ms, fft %lf ms -> %7s", &dft_ms, &fft_ms,
                        choice),
            3)
      << line;
  EXPECT_GT(dft_ms, 0.0);
  EXPECT_GT(fft_ms, 0.0);
  // The verdict follows the times printed (2 decimals) with the 10 % margin, unless they round
  // to a tie at it.
  if (std::abs(dft_ms - 0.9 * fft_ms) > 0.02) {
    EXPECT_EQ(verdict, dft_ms < 0.9 * fft_ms) << line;
  }
  EXPECT_EQ(std::string(choice), verdict ? "dft" : "fft");
  // Asked again, in no-grad mode as in validation: remembered, not measured again.
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(dft_pays(at::randn({2, 4, 32, 16}), modes), verdict);
  }
  EXPECT_EQ(lines().size(), before + 1);
  // Another shape, first met in inference mode (validation): measured all the same (the probe
  // copies the input out of inference mode and turns autograd on for its backward).
  {
    const c10::InferenceMode inference;
    dft_pays(at::randn({1, 4, 32, 16}), modes);
  }
  EXPECT_EQ(lines().size(), before + 2);
}

// The transform matrices are built once per shape: first built in inference mode (validation
// before any training step of that shape), they must still serve a training step's backward.
TEST(FnoSpectral, DftMatricesMadeInInferenceModeServeTraining) {
  const std::vector<int64_t> modes{3, 2}, grid{10, 7};  // a shape no other test uses
  {
    const c10::InferenceMode inference;
    irfft_modes_dft(rfft_modes_dft(at::randn({1, 2, 10, 7}), modes), grid);
  }
  const at::Tensor x = at::randn({1, 2, 10, 7}, at::kFloat).requires_grad_(true);
  irfft_modes_dft(rfft_modes_dft(x, modes), grid).square().sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
}

// The real-arithmetic mode mixing against LibTorch's complex bmm, in float64: the product, and
// the gradients of a random linear functional of it with respect to the input and the weights'
// real storage. Tolerance 1e-12 relative to the largest magnitude (the same sums, reordered).
TEST(FnoSpectral, RealModeMixingEqualsTheComplexProductAndItsGradients) {
  torch::manual_seed(11);
  for (const std::vector<int64_t>& k : std::vector<std::vector<int64_t>>{{5}, {4, 3}, {2, 4, 3}}) {
    std::vector<int64_t> xshape{3, 4}, wshape{4, 5};
    xshape.insert(xshape.end(), k.begin(), k.end());
    wshape.insert(wshape.end(), k.begin(), k.end());
    wshape.push_back(2);
    const at::Tensor x0 = at::randn(xshape, at::kComplexDouble);
    const at::Tensor w0 = at::randn(wshape, at::kDouble);
    std::vector<int64_t> oshape{3, 5};
    oshape.insert(oshape.end(), k.begin(), k.end());
    const at::Tensor r = at::randn(oshape, at::kComplexDouble);  // d loss / d output
    const auto run = [&](bool real) {
      at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
      const at::Tensor y = real ? mix_modes_real(x, w) : mix_modes(x, at::view_as_complex(w));
      at::view_as_real(y * r.conj()).sum().backward();
      return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad()};
    };
    const std::vector<at::Tensor> got = run(true), want = run(false);
    const std::string where = "modes " + c10::str(at::IntArrayRef(k));
    EXPECT_TRUE(tensors_close(at::view_as_real(got[0]), at::view_as_real(want[0]), 1e-12,
                              "product, " + where));
    EXPECT_TRUE(tensors_close(at::view_as_real(got[1]), at::view_as_real(want[1]), 1e-12,
                              "input gradient, " + where));
    EXPECT_TRUE(tensors_close(got[2], want[2], 1e-12, "weight gradient, " + where));
  }
}

TEST(FnoSpectral, WeightsStartAsThePapersScaledUniformComplex) {
  torch::manual_seed(4);
  SpectralConvOptions o;
  o.in_channels = 8;
  o.out_channels = 4;
  o.modes = {6, 5};
  SpectralConv conv(o);
  EXPECT_EQ(conv->weight.sizes(), (std::vector<int64_t>{8, 4, 12, 5, 2}));
  // scale * U[0, 1) for the real and imaginary parts, scale = 1 / (8 * 4).
  EXPECT_GE(conv->weight.min().item<double>(), 0.0);
  EXPECT_LT(conv->weight.max().item<double>(), 1.0 / 32.0);
  EXPECT_NEAR(conv->weight.mean().item<double>(), 0.5 / 32.0, 0.05 / 32.0);
}

TEST(FnoModel, ParameterCountOfThePapers1dModel) {
  // fourier_1d.py (Li et al.): modes 16, width 64, input (a(x), x), fc1 128 -> 549,569 parameters:
  // fc0 2*64+64, 4 x (64*64*16 complex = 131,072 reals + 1x1 conv 64*64+64), fc1 64*128+128,
  // fc2 128+1.
  FnoOptions o;
  o.in_channels = 1;
  o.out_channels = 1;
  o.modes = {16};
  o.width = 64;
  o.layers = 4;
  o.projection_channels = 128;
  Fno net(o);
  EXPECT_EQ(count_parameters(*net), 192 + 4 * (131072 + 4160) + 8320 + 129);
  EXPECT_EQ(count_parameters(*net), 549569);
  const at::Tensor y = net->forward(at::randn({3, 1, 64}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 1, 64}));
}

// bias false (operator_learning's bias: false): the parameter count of configs/fno.yml's model
// without any bias, counted by hand, and a map with no constant term: a zero field goes to an
// exactly zero field (GELU(0) = 0, the transforms are linear), which a bias would break.
TEST(FnoModel, NoBiasDropsEveryBiasAndMapsZeroToZero) {
  FnoOptions o;
  o.in_channels = 4;  // u_x, u_z, b, p
  o.out_channels = 4;
  o.modes = {12, 12};
  o.width = 16;
  o.layers = 2;
  o.projection_channels = 64;
  o.grid_coordinates = false;
  o.bias = false;
  torch::manual_seed(3);
  Fno net(o);
  // lift 4 x 16; per layer 16 x 16 x (2 x 12) x 12 complex weights (x2 reals) + 16 x 16;
  // projection 16 x 64; output 64 x 4.
  EXPECT_EQ(count_parameters(*net), 64 + 2 * (2 * 16 * 16 * 24 * 12 + 256) + 1024 + 256);
  EXPECT_EQ(count_parameters(*net), 296768);
  const at::Tensor zero = at::zeros({2, 4, 32, 24});
  EXPECT_EQ(net->forward(zero).abs().max().item<float>(), 0.0f);
  o.bias = true;
  torch::manual_seed(3);
  Fno with_bias(o);
  EXPECT_EQ(count_parameters(*with_bias), 296768 + 16 + 2 * 16 + 64 + 4);
  EXPECT_GT(with_bias->forward(zero).abs().max().item<float>(), 0.0f);
}

// configs/fno.yml's model with operator_learning's P and Q (scaling_layers 4, 64 wide) and its
// GELU after every Fourier layer: the parameter count by hand, and the last GELU changes the map.
TEST(FnoModel, OperatorLearningsLiftingAndProjectionDepths) {
  FnoOptions o;
  o.in_channels = 4;
  o.out_channels = 4;
  o.modes = {12, 12};
  o.width = 16;
  o.layers = 2;
  o.projection_channels = 64;
  o.grid_coordinates = false;
  o.bias = false;
  o.lifting_layers = 4;
  o.projection_layers = 4;
  torch::manual_seed(5);
  Fno net(o);
  // P: 4 x 64 + 2 x 64 x 64 + 64 x 16; layers as above; Q: 16 x 64 + 2 x 64 x 64 + 64 x 4.
  EXPECT_EQ(count_parameters(*net),
            (256 + 8192 + 1024) + 2 * (2 * 16 * 16 * 24 * 12 + 256) + (1024 + 8192 + 256));
  EXPECT_EQ(count_parameters(*net), 314368);
  const at::Tensor x = at::randn({1, 4, 32, 24});
  const at::Tensor y = net->forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 4, 32, 24}));
  o.gelu_after_last_layer = true;
  torch::manual_seed(5);
  Fno gelu_last(o);
  EXPECT_GT((gelu_last->forward(x) - y).abs().max().item<float>(), 1e-6f);
  o.projection_layers = 1;
  EXPECT_ANY_THROW(Fno{o});
}

// The whole model's gradients in float32 against the same model in float64, itself checked against
// central finite differences: catches wrong backward kernels (LibTorch 1.13's float32 CPU
// gelu_backward is wrong for non-contiguous gradients, which fno.cpp's GELU works around).
// The fused projection against the three ops it replaces (channel_linear, GELU, channel_linear),
// outputs and the gradients of a random linear functional with respect to the input and every
// weight and bias: float64 to 1e-12, float32 to 1e-5 (relative to the largest magnitude). 1024
// hidden channels make the tile 128 points, so the 2 x 300 points run as two full tiles and a
// partial one per example; with and without biases.
TEST(FnoModel, FusedProjectionEqualsTheUnfusedMapsAndTheirGradients) {
  for (const at::ScalarType type : {at::kDouble, at::kFloat})
    for (const bool bias : {true, false}) {
      torch::manual_seed(17);
      torch::nn::Linear first(torch::nn::LinearOptions(3, 1024).bias(bias));
      torch::nn::Linear second(torch::nn::LinearOptions(1024, 2).bias(bias));
      first->to(type);
      second->to(type);
      const at::Tensor x0 = at::randn({2, 3, 20, 15}, type);
      const at::Tensor r = at::randn({2, 2, 20, 15}, type);
      const auto run = [&](bool fused) {
        first->zero_grad();
        second->zero_grad();
        const at::Tensor x = x0.clone().requires_grad_(true);
        const at::Tensor y = fused ? fused_projection(x, *first, *second)
                                   : channel_linear(fno::gelu(channel_linear(x, *first)), *second);
        (y * r).sum().backward();
        std::vector<at::Tensor> out{y.detach(), x.grad(), first->weight.grad().clone(),
                                    second->weight.grad().clone()};
        if (bias) {
          out.push_back(first->bias.grad().clone());
          out.push_back(second->bias.grad().clone());
        }
        return out;
      };
      const std::vector<at::Tensor> got = run(true), want = run(false);
      const double tol = type == at::kDouble ? 1e-12 : 1e-5;
      const char* names[] = {"output",
                             "input gradient",
                             "first weight gradient",
                             "second weight gradient",
                             "first bias gradient",
                             "second bias gradient"};
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(tensors_close(got[i], want[i], tol,
                                  std::string(names[i]) + (bias ? ", bias" : ", no bias") +
                                      (type == at::kDouble ? ", float64" : ", float32")));
    }
}

// The fused pointwise branch of a Fourier layer against the ops it replaces (channel_linear, the
// add of the spectral branch, GELU): output and the gradients of a random linear functional with
// respect to the input, the added branch, the weight and the bias; float64 to 1e-12, float32 to
// 1e-5 (relative to the largest magnitude); with and without bias and GELU (the last layer has
// none), on a 2-d and a 1-d grid.
TEST(FnoModel, FusedPointwiseEqualsTheUnfusedOpsAndTheirGradients) {
  for (const at::ScalarType type : {at::kDouble, at::kFloat})
    for (const bool bias : {true, false})
      for (const bool gelu : {true, false})
        for (const std::vector<int64_t>& grid : {std::vector<int64_t>{7, 6}, {11}}) {
          torch::manual_seed(23);
          torch::nn::Linear linear(torch::nn::LinearOptions(3, 5).bias(bias));
          linear->to(type);
          std::vector<int64_t> xshape{2, 3}, yshape{2, 5};
          xshape.insert(xshape.end(), grid.begin(), grid.end());
          yshape.insert(yshape.end(), grid.begin(), grid.end());
          const at::Tensor x0 = at::randn(xshape, type), s0 = at::randn(yshape, type);
          const at::Tensor r = at::randn(yshape, type);
          const auto run = [&](bool fused) {
            linear->zero_grad();
            const at::Tensor x = x0.clone().requires_grad_(true);
            const at::Tensor s = s0.clone().requires_grad_(true);
            at::Tensor y;
            if (fused) {
              y = fused_pointwise(x, *linear, s, gelu);
            } else {
              y = s + channel_linear(x, *linear);
              if (gelu) y = fno::gelu(y);
            }
            (y * r).sum().backward();
            std::vector<at::Tensor> out{y.detach(), x.grad(), s.grad(),
                                        linear->weight.grad().clone()};
            if (bias) out.push_back(linear->bias.grad().clone());
            return out;
          };
          const std::vector<at::Tensor> got = run(true), want = run(false);
          const double tol = type == at::kDouble ? 1e-12 : 1e-5;
          const char* names[] = {"output", "input gradient", "added branch's gradient",
                                 "weight gradient", "bias gradient"};
          ASSERT_EQ(got.size(), want.size());
          for (std::size_t i = 0; i < got.size(); ++i)
            EXPECT_TRUE(tensors_close(got[i], want[i], tol,
                                      std::string(names[i]) + (bias ? ", bias" : ", no bias") +
                                          (gelu ? ", GELU" : ", no GELU") + ", grid " +
                                          c10::str(at::IntArrayRef(grid)) +
                                          (type == at::kDouble ? ", float64" : ", float32")));
        }
}

TEST(FnoModel, GradientsMatchFloat64AndFiniteDifferences) {
  for (const bool real_mixing : {true, false})
    for (const Case& c : cases()) {
      torch::manual_seed(5);
      FnoOptions o;
      o.real_mode_mixing = real_mixing;
      o.fused_projection = real_mixing;  // the new paths together, the references together
      o.fused_pointwise = real_mixing;
      o.spectral_transform =
          real_mixing ? SpectralConvOptions::Transform::Dft : SpectralConvOptions::Transform::Fft;
      o.in_channels = 2;
      o.out_channels = 3;
      o.modes = c.modes;
      o.width = 6;
      o.layers = 2;
      o.projection_channels = 8;
      Fno net(o);
      std::vector<int64_t> shape{2, 2};
      shape.insert(shape.end(), c.grid.begin(), c.grid.end());
      const at::Tensor x = at::randn(shape);
      std::vector<int64_t> oshape{2, 3};
      oshape.insert(oshape.end(), c.grid.begin(), c.grid.end());
      const at::Tensor r = at::randn(oshape);  // d loss / d output
      const auto loss_of = [&](Fno& m, at::ScalarType t) {
        return (m->forward(x.to(t)) * r.to(t)).sum();
      };
      loss_of(net, at::kFloat).backward();
      Fno net64(o);
      {
        torch::NoGradGuard no_grad;
        net64->to(at::kDouble);
        const auto src = net->parameters();
        const auto dst = net64->parameters();
        for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
      }
      loss_of(net64, at::kDouble).backward();
      const auto p32 = net->named_parameters();
      const auto p64 = net64->named_parameters();
      for (std::size_t i = 0; i < p32.size(); ++i)
        EXPECT_TRUE(tensors_close(p32[i].value().grad(), p64[i].value().grad(), 1e-4,
                                  "float32 gradient of " + p32[i].key() + ", " + name_of(c) +
                                      (real_mixing ? ", new paths" : ", reference paths")));
      // Finite differences of the float64 loss for a few entries of the first and last spectral
      // weights.
      for (const char* name : {"spectral.0.weight", "spectral.1.weight", "lift.weight"}) {
        at::Tensor p = net64->named_parameters()[name];
        const at::Tensor g = p.grad().flatten();
        for (int64_t j : {int64_t{0}, p.numel() / 3, p.numel() - 1}) {
          torch::NoGradGuard no_grad;
          const double h = 1e-6, v = p.flatten()[j].item<double>();
          p.flatten()[j] = v + h;
          const double up = loss_of(net64, at::kDouble).item<double>();
          p.flatten()[j] = v - h;
          const double down = loss_of(net64, at::kDouble).item<double>();
          p.flatten()[j] = v;
          const double fd = (up - down) / (2 * h);
          EXPECT_NEAR(g[j].item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd)))
              << name << "[" << j << "], " << name_of(c) << (real_mixing ? ", new" : ", reference")
              << " paths";
        }
      }
    }
}

// A Fourier layer's pointwise map (channel_linear) under bf16 autocast on a CPU without bf16
// products (forced, so every CPU runs it): the weight and input rounded to bf16, multiplied in
// float32, the product rounded to bf16 and the bias added in bf16, as autocast's bf16 matmul and
// add would give it; against the float64 product of the rounded operands, rounded the same way
// (every element within one bf16 step, 2^-7 of its magnitude: the float32 and float64 sums may
// round to neighbouring bf16 values, and the bias's add rounds once more), and the input and weight
// gradients (incoming gradient bf16) within one bf16 step of the float64 ones rounded to bf16.
TEST(ChannelLinear, Bf16WithoutBf16ProductsIsAutocastsProductInFloat32) {
  const ForcedBf16Products forced(0);
  at::manual_seed(31);
  torch::nn::Linear linear(torch::nn::LinearOptions(24, 20));
  const at::Tensor x = at::randn({2, 24, 6, 5}).requires_grad_(true);
  at::Tensor y;
  {
    nn::AutocastState amp = nn::AutocastState::current();
    amp.cpu_enabled = true;
    amp.cpu_dtype = at::kBFloat16;
    const nn::AutocastGuard guard(amp);
    y = channel_linear(x, *linear);
  }
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor g = at::randn(y.sizes()).to(at::kBFloat16);
  const auto grads = torch::autograd::grad({y}, {x, linear->weight}, {g});
  const auto rounded = [](const at::Tensor& t) {
    return t.detach().to(at::kBFloat16).to(at::kDouble);
  };
  const at::Tensor xd = rounded(x).requires_grad_(true),
                   wd = rounded(linear->weight).requires_grad_(true);
  const at::Tensor product = at::matmul(wd, xd.reshape({2, 24, -1})).view({2, 20, 6, 5});
  const auto ref = torch::autograd::grad({product}, {xd, wd}, {g.to(at::kDouble)});
  const at::Tensor want = rounded(rounded(product) + rounded(linear->bias).view({1, -1, 1, 1}));
  EXPECT_TRUE(model::test::within_a_bf16_step(y, want, "output"));
  EXPECT_EQ(grads[0].scalar_type(), at::kFloat);
  EXPECT_TRUE(model::test::within_a_bf16_step(grads[0], rounded(ref[0]), "input gradient"));
  EXPECT_TRUE(model::test::within_a_bf16_step(grads[1], rounded(ref[1]), "weight gradient"));
}

}  // namespace
}  // namespace scaffold::fno
