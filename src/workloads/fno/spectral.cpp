#include "workloads/fno/spectral.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"

namespace scaffold::fno {

std::vector<int64_t> kept_mode_shape(const std::vector<int64_t>& modes) {
  std::vector<int64_t> k;
  for (std::size_t i = 0; i < modes.size(); ++i)
    k.push_back(i + 1 < modes.size() ? 2 * modes[i] : modes[i]);
  return k;
}

at::Tensor keep_corners(const at::Tensor& t, int64_t dim, int64_t m) {
  const int64_t n = t.size(dim);
  SCAFFOLD_CHECK(2 * m <= n,
                 fmt::format("{} modes of both signs do not fit an axis of {} points", m, n));
  if (2 * m == n) return t;
  return at::cat({t.narrow(dim, 0, m), t.narrow(dim, n - m, m)}, dim);
}

at::Tensor place_corners(const at::Tensor& t, int64_t dim, int64_t size) {
  const int64_t m2 = t.size(dim);
  SCAFFOLD_CHECK(m2 % 2 == 0 && m2 <= size,
                 fmt::format("{} corner modes do not fit an axis of {}", m2, size));
  if (m2 == size) return t;
  std::vector<int64_t> zshape = t.sizes().vec();
  zshape[static_cast<std::size_t>(dim < 0 ? dim + t.dim() : dim)] = size - m2;
  return at::cat(
      {t.narrow(dim, 0, m2 / 2), at::zeros(zshape, t.options()), t.narrow(dim, m2 / 2, m2 / 2)},
      dim);
}

at::Tensor keep_low(const at::Tensor& t, int64_t dim, int64_t m) {
  SCAFFOLD_CHECK(m <= t.size(dim),
                 fmt::format("{} modes do not fit a half spectrum of {}", m, t.size(dim)));
  return m == t.size(dim) ? t : t.narrow(dim, 0, m);
}

at::Tensor place_low(const at::Tensor& t, int64_t dim, int64_t size) {
  const int64_t m = t.size(dim);
  SCAFFOLD_CHECK(m <= size, fmt::format("{} modes do not fit a half spectrum of {}", m, size));
  if (m == size) return t;
  std::vector<int64_t> zshape = t.sizes().vec();
  zshape[static_cast<std::size_t>(dim < 0 ? dim + t.dim() : dim)] = size - m;
  return at::cat({t, at::zeros(zshape, t.options())}, dim);
}

at::Tensor rfft_modes(const at::Tensor& x, const std::vector<int64_t>& modes) {
  const auto d = static_cast<int64_t>(modes.size());
  SCAFFOLD_CHECK(x.dim() == d + 2,
                 fmt::format("rfft_modes: a {}-d tensor for {} spatial dimensions", x.dim(), d));
  // The last axis first (real to complex, half spectrum), then the others on the kept columns.
  at::Tensor y =
      keep_low(at::fft_rfft(x, c10::nullopt, d + 1), d + 1, modes[static_cast<std::size_t>(d - 1)]);
  for (int64_t i = d - 2; i >= 0; --i)
    y = keep_corners(at::fft_fft(y, c10::nullopt, 2 + i), 2 + i,
                     modes[static_cast<std::size_t>(i)]);
  return y;
}

at::Tensor irfft_modes(const at::Tensor& kept, const std::vector<int64_t>& grid) {
  const auto d = static_cast<int64_t>(grid.size());
  SCAFFOLD_CHECK(kept.dim() == d + 2,
                 fmt::format("irfft_modes: a {}-d spectrum for a {}-d grid", kept.dim(), d));
  at::Tensor y = kept;
  for (int64_t i = 0; i + 1 < d; ++i)
    y = at::fft_ifft(place_corners(y, 2 + i, grid[static_cast<std::size_t>(i)]), c10::nullopt,
                     2 + i);
  const int64_t n_last = grid[static_cast<std::size_t>(d - 1)];
  return at::fft_irfft(place_low(y, d + 1, n_last / 2 + 1), n_last, d + 1);
}

namespace {

// The transform matrices of the truncated DFTs (angles reduced mod N in integers, then in float64).
// n points, m kept frequencies (RealForward, RealInverse: 0..m-1; the complex ones: m each side,
// 0..m-1 and n-m..n-1, the order keep_corners uses).
enum class DftKind { RealForward, RealInverse, ComplexForward, ComplexInverse };

at::Tensor make_dft_matrix(DftKind kind, int64_t n, int64_t m) {
  const double two_pi = 2.0 * 3.14159265358979323846;
  const bool complex = kind == DftKind::ComplexForward || kind == DftKind::ComplexInverse;
  const int64_t k_count = complex ? 2 * m : m;
  const auto freq = [&](int64_t j) { return complex && j >= m ? n - 2 * m + j : j; };
  const auto angle = [&](int64_t p, int64_t k) {
    return two_pi * static_cast<double>((p * k) % n) / static_cast<double>(n);
  };
  at::Tensor t;
  switch (kind) {
    case DftKind::RealForward: {  // (n, 2m): x -> [Re X, Im X], X_k = sum_p x_p e^{-i theta}
      t = at::zeros({n, 2 * m}, at::kDouble);
      auto a = t.accessor<double, 2>();
      for (int64_t p = 0; p < n; ++p)
        for (int64_t j = 0; j < m; ++j) {
          a[p][j] = std::cos(angle(p, j));
          a[p][m + j] = -std::sin(angle(p, j));
        }
      break;
    }
    case DftKind::RealInverse: {  // (2m, n): irfft of the half spectrum holding m bins, 1 / n
      t = at::zeros({2 * m, n}, at::kDouble);
      auto a = t.accessor<double, 2>();
      for (int64_t j = 0; j < m; ++j) {
        // The bins other than 0 and n/2 stand for their conjugate twins too; irfft ignores the
        // imaginary parts of those two (their sines are 0 here).
        const double c = (j == 0 || 2 * j == n) ? 1.0 : 2.0;
        for (int64_t p = 0; p < n; ++p) {
          a[j][p] = c * std::cos(angle(p, j)) / static_cast<double>(n);
          a[m + j][p] = -c * std::sin(angle(p, j)) / static_cast<double>(n);
        }
      }
      break;
    }
    case DftKind::ComplexForward: {  // (2n, 2K): [Re z, Im z] -> [Re Z, Im Z], e^{-i theta}
      t = at::zeros({2 * n, 2 * k_count}, at::kDouble);
      auto a = t.accessor<double, 2>();
      for (int64_t p = 0; p < n; ++p)
        for (int64_t j = 0; j < k_count; ++j) {
          const double c = std::cos(angle(p, freq(j))), sn = std::sin(angle(p, freq(j)));
          a[p][j] = c;
          a[n + p][j] = sn;
          a[p][k_count + j] = -sn;
          a[n + p][k_count + j] = c;
        }
      break;
    }
    case DftKind::ComplexInverse: {  // (2K, 2n): [Re Z, Im Z] -> [Re z, Im z], e^{+i theta} / n
      t = at::zeros({2 * k_count, 2 * n}, at::kDouble);
      auto a = t.accessor<double, 2>();
      const double inv = 1.0 / static_cast<double>(n);
      for (int64_t j = 0; j < k_count; ++j)
        for (int64_t p = 0; p < n; ++p) {
          const double c = std::cos(angle(p, freq(j))) * inv,
                       sn = std::sin(angle(p, freq(j))) * inv;
          a[j][p] = c;
          a[k_count + j][p] = -sn;
          a[j][n + p] = sn;
          a[k_count + j][n + p] = c;
        }
      break;
    }
  }
  return t;
}

// The matrix for (kind, n, m) in `like`'s dtype and device, built once per process.
at::Tensor dft_matrix(DftKind kind, int64_t n, int64_t m, const at::Tensor& like) {
  using Key = std::tuple<int, int64_t, int64_t, int, std::string>;
  static std::mutex mutex;
  static std::map<Key, at::Tensor> cache;
  const Key key{static_cast<int>(kind), n, m, static_cast<int>(like.scalar_type()),
                like.device().str()};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // A normal tensor even when first asked under inference mode (validation): training saves it
  // for backward, which an inference tensor cannot be.
  const c10::InferenceMode normal(false);
  at::Tensor t = make_dft_matrix(kind, n, m).to(like.options().requires_grad(false));
  if (cache.size() >= 64) cache.clear();  // a bound for shape-changing callers
  cache.emplace(key, t);
  return t;
}

// r (..., 2 [re, im] at the end) with the complex transform `w` applied along dimension `dim`,
// whose extent becomes w.size(1) / 2.
at::Tensor complex_axis_product(const at::Tensor& r, int64_t dim, const at::Tensor& w) {
  const at::Tensor t = r.movedim(dim, -1);  // (..., 2, n): the pair, then the axis
  std::vector<int64_t> shape = t.sizes().vec();
  shape.pop_back();
  shape.pop_back();
  std::vector<int64_t> flat = shape;
  flat.push_back(w.size(0));
  shape.push_back(2);
  shape.push_back(w.size(1) / 2);
  return at::matmul(t.reshape(flat), w).view(shape).movedim(-1, dim);
}

}  // namespace

at::Tensor rfft_modes_dft(const at::Tensor& x, const std::vector<int64_t>& modes) {
  const auto d = static_cast<int64_t>(modes.size());
  SCAFFOLD_CHECK(x.dim() == d + 2, fmt::format("rfft_modes_dft: a {}-d tensor for {} spatial "
                                               "dimensions",
                                               x.dim(), d));
  const int64_t n_last = x.size(d + 1), m_last = modes[static_cast<std::size_t>(d - 1)];
  SCAFFOLD_CHECK(m_last <= n_last / 2 + 1,
                 fmt::format("{} modes do not fit a half spectrum of {}", m_last, n_last / 2 + 1));
  // The last axis, real to complex: (..., n) x (n, 2m) -> (..., 2, m) -> (..., m, 2).
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = 2;
  shape.push_back(m_last);
  at::Tensor r = at::matmul(x, dft_matrix(DftKind::RealForward, n_last, m_last, x))
                     .view(shape)
                     .transpose(-1, -2);
  for (int64_t i = d - 2; i >= 0; --i) {
    const int64_t n = x.size(2 + i), m = modes[static_cast<std::size_t>(i)];
    SCAFFOLD_CHECK(2 * m <= n,
                   fmt::format("{} modes of both signs do not fit an axis of {} points", m, n));
    r = complex_axis_product(r, 2 + i, dft_matrix(DftKind::ComplexForward, n, m, x));
  }
  return at::view_as_complex(r.contiguous());
}

at::Tensor irfft_modes_dft(const at::Tensor& kept, const std::vector<int64_t>& grid) {
  const auto d = static_cast<int64_t>(grid.size());
  SCAFFOLD_CHECK(kept.dim() == d + 2,
                 fmt::format("irfft_modes_dft: a {}-d spectrum for a {}-d grid", kept.dim(), d));
  at::Tensor r = at::view_as_real(kept);  // (B, C, *K, 2)
  for (int64_t i = 0; i + 1 < d; ++i) {
    const int64_t k = r.size(2 + i), n = grid[static_cast<std::size_t>(i)];
    SCAFFOLD_CHECK(k % 2 == 0 && k <= n,
                   fmt::format("{} corner modes do not fit an axis of {}", k, n));
    r = complex_axis_product(r, 2 + i, dft_matrix(DftKind::ComplexInverse, n, k / 2, r));
  }
  // The last axis, complex to real: (..., m, 2) -> (..., 2m) x (2m, n) -> (..., n).
  const int64_t n_last = grid[static_cast<std::size_t>(d - 1)], m_last = r.size(-2);
  SCAFFOLD_CHECK(m_last <= n_last / 2 + 1,
                 fmt::format("{} modes do not fit a half spectrum of {}", m_last, n_last / 2 + 1));
  const at::Tensor t = r.transpose(-1, -2);
  std::vector<int64_t> flat = t.sizes().vec();
  flat.pop_back();
  flat.back() = 2 * m_last;
  return at::matmul(t.reshape(flat), dft_matrix(DftKind::RealInverse, n_last, m_last, r));
}

bool dft_pays(const at::Tensor& x_in, const std::vector<int64_t>& modes) {
  const std::string shape = fmt::format("x {} {} modes {}", fmt::join(x_in.sizes(), "x"),
                                        c10::toString(x_in.scalar_type()), fmt::join(modes, "x"));
  return kernels::probe_verdicts().choose("spectral " + shape, [&] {
    // The backward is part of what is timed, also when asked in validation (no grad, or
    // inference mode, whose tensors take no gradient: hence the copy).
    const c10::InferenceMode normal(false);
    const torch::AutoGradMode grad_on(true);
    const at::Tensor x = x_in.detach().clone().requires_grad_(true);
    const std::vector<int64_t> grid = x.sizes().slice(2).vec();
    const auto round_trip = [&](bool dft) {
      return [&, dft] {
        const at::Tensor y = dft ? irfft_modes_dft(rfft_modes_dft(x, modes), grid)
                                 : irfft_modes(rfft_modes(x, modes), grid);
        y.backward(y.detach());
        x.mutable_grad() = at::Tensor();
      };
    };
    const double dft_ms = core::best_time_ms(round_trip(true)),
                 fft_ms = core::best_time_ms(round_trip(false));
    return kernels::ProbeResult{dft_ms < kDftMargin * fft_ms ? "dft" : "fft",
                                {{"dft", dft_ms}, {"fft", fft_ms}}};
  }) == "dft";
}

const char* to_string(SpectralConvOptions::Transform t) {
  switch (t) {
    case SpectralConvOptions::Transform::Dft:
      return "dft";
    case SpectralConvOptions::Transform::Probe:
      return "probe";
    case SpectralConvOptions::Transform::Fft:
      break;
  }
  return "fft";
}

at::Tensor mix_modes(const at::Tensor& x, const at::Tensor& weight) {
  const int64_t b = x.size(0), ci = x.size(1), co = weight.size(1);
  SCAFFOLD_CHECK(weight.size(0) == ci && x.dim() == weight.dim() &&
                     x.sizes().slice(2) == weight.sizes().slice(2),
                 fmt::format("mix_modes: input {} and weight {} do not match", c10::str(x.sizes()),
                             c10::str(weight.sizes())));
  const int64_t k = x.numel() / std::max<int64_t>(b * ci, 1);
  // One (B, Ci) x (Ci, Co) product per kept mode: the modes are the batch of a bmm.
  const at::Tensor xk = x.reshape({b, ci, k}).permute({2, 0, 1});        // (K, B, Ci)
  const at::Tensor wk = weight.reshape({ci, co, k}).permute({2, 0, 1});  // (K, Ci, Co)
  std::vector<int64_t> shape{b, co};
  for (int64_t s : x.sizes().slice(2)) shape.push_back(s);
  return at::bmm(xk, wk).permute({1, 2, 0}).reshape(shape);  // (B, Co, *K)
}

namespace {

// The (K, 2 Ci, 2 Co) blocks [[Wr, Wi], [-Wi, Wr]] of weights in real storage (Ci, Co, *K, 2), in
// one pass each way. Built from selects and cats, autograd took them apart through a zero-filled
// full-size gradient per select, the cats' and the negation's backward: about a sixth of a
// 128 x 32 FNO step's time (docs/performance.md).
class WeightBlocks : public torch::autograd::Function<WeightBlocks> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& weight) {
    const int64_t ci = weight.size(0), co = weight.size(1);
    const int64_t k = weight.numel() / std::max<int64_t>(ci * co * 2, 1);
    ctx->saved_data["shape"] = weight.sizes().vec();
    const at::Tensor w = weight.reshape({ci, co, k, 2}).permute({2, 0, 3, 1});  // (K, Ci, 2, Co)
    const at::Tensor wr = w.select(2, 0), wi = w.select(2, 1);
    at::Tensor blocks = at::empty({k, 2, ci, 2, co}, weight.options());
    blocks.select(1, 0).select(2, 0).copy_(wr);
    blocks.select(1, 0).select(2, 1).copy_(wi);
    blocks.select(1, 1).select(2, 0).copy_(wi).neg_();
    blocks.select(1, 1).select(2, 1).copy_(wr);
    return blocks.view({k, 2 * ci, 2 * co});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const int64_t ci = shape[0], co = shape[1];
    const at::Tensor& g_in = grad_outputs.at(0);
    const int64_t k = g_in.size(0);
    const at::Tensor g = g_in.reshape({k, 2, ci, 2, co});
    const auto part = [&](int64_t a, int64_t b) { return g.select(1, a).select(2, b); };
    // Wr appears in blocks (0, 0) and (1, 1), Wi in (0, 1) and, negated, in (1, 0).
    const at::Tensor dw = at::stack({part(0, 0) + part(1, 1), part(0, 1) - part(1, 0)}, -1);
    return {dw.permute({1, 2, 0, 3}).reshape(shape)};  // (K, Ci, Co, 2) -> (Ci, Co, *K, 2)
  }
};

}  // namespace

at::Tensor mix_modes_real(const at::Tensor& x, const at::Tensor& weight) {
  const int64_t b = x.size(0), ci = x.size(1), co = weight.size(1);
  SCAFFOLD_CHECK(weight.size(0) == ci && weight.dim() == x.dim() + 1 && weight.size(-1) == 2 &&
                     x.sizes().slice(2) == weight.sizes().slice(2, x.dim() - 2),
                 fmt::format("mix_modes_real: input {} and weight {} do not match",
                             c10::str(x.sizes()), c10::str(weight.sizes())));
  const int64_t k = x.numel() / std::max<int64_t>(b * ci, 1);
  // (K, B, 2 Ci): each mode's inputs, the real parts then the imaginary ones.
  const at::Tensor xk =
      at::view_as_real(x).reshape({b, ci, k, 2}).permute({2, 0, 3, 1}).reshape({k, b, 2 * ci});
  // (K, 2 Ci, 2 Co) = [[Wr, Wi], [-Wi, Wr]]: [xr, xi] times it is [xr Wr - xi Wi, xr Wi + xi Wr].
  const at::Tensor wk = WeightBlocks::apply(weight);
  std::vector<int64_t> shape{b, co};
  for (int64_t s : x.sizes().slice(2)) shape.push_back(s);
  // (K, B, 2 Co) -> (B, Co, K, 2) -> complex (B, Co, *K).
  // Our batched loop on CPUs (LibTorch 1.13's CPU bmm runs one GEMM per mode through select and
  // as_strided: kernels/batched_matmul.hpp), LibTorch's bmm elsewhere.
  const at::Tensor product =
      kernels::batched_matmul_supported(xk, wk) ? kernels::batched_matmul(xk, wk) : at::bmm(xk, wk);
  const at::Tensor out = product.reshape({k, b, 2, co}).permute({1, 3, 0, 2});
  // clone, not contiguous(): a rank holding none of the modes (K = 0, sharded) has an empty `out`,
  // which counts as contiguous with the permuted strides view_as_complex refuses.
  return at::view_as_complex(out.clone(at::MemoryFormat::Contiguous)).reshape(shape);
}

namespace {

// The kept modes times their weights, given in real storage (Ci, Co, *K, 2): in real arithmetic
// or through the complex view (the reference).
at::Tensor mix_kept_modes(const at::Tensor& kept, const at::Tensor& weight, bool real) {
  return real ? mix_modes_real(kept, weight) : mix_modes(kept, at::view_as_complex(weight));
}

}  // namespace

SpectralConvImpl::SpectralConvImpl(SpectralConvOptions options) : options_(std::move(options)) {
  SCAFFOLD_CHECK(
      !options_.modes.empty() && options_.modes.size() <= 3,
      fmt::format("SpectralConv: {} spatial dimensions (1 to 3 supported)", options_.modes.size()));
  for (int64_t m : options_.modes) SCAFFOLD_CHECK(m >= 1, "SpectralConv: modes must be >= 1");
  reset();
}

void SpectralConvImpl::reset() {
  std::vector<int64_t> shape{options_.in_channels, options_.out_channels};
  for (int64_t k : kept_mode_shape(options_.modes)) shape.push_back(k);
  shape.push_back(2);
  const double scale = 1.0 / static_cast<double>(options_.in_channels * options_.out_channels);
  torch::NoGradGuard no_grad;
  weight = register_parameter("weight", at::rand(shape, at::kFloat) * scale);
}

at::Tensor SpectralConvImpl::complex_weight() const {
  return at::view_as_complex(weight);
}

at::Tensor SpectralConvImpl::forward(const at::Tensor& x_in) {
  const auto d = static_cast<int64_t>(options_.modes.size());
  SCAFFOLD_CHECK(x_in.dim() == d + 2 && x_in.size(1) == options_.in_channels,
                 fmt::format("SpectralConv: input {} for {} channels on a {}-d grid",
                             c10::str(x_in.sizes()), options_.in_channels, d));
  nn::AutocastGuard autocast_off(nn::AutocastState::current().disabled());
  // The weights' precision (float32; float64 in tests), whatever autocast made of the input.
  const at::Tensor x =
      x_in.scalar_type() == weight.scalar_type() ? x_in : x_in.to(weight.scalar_type());
  if (!shard_ || shard_->parts() == 1) {
    std::vector<int64_t> grid = x.sizes().slice(2).vec();
    using Transform = SpectralConvOptions::Transform;
    const bool dft = options_.transform == Transform::Dft ||
                     (options_.transform == Transform::Probe && dft_pays(x, options_.modes));
    if (dft)
      return irfft_modes_dft(
          mix_kept_modes(rfft_modes_dft(x, options_.modes), weight, options_.real_mixing), grid);
    return irfft_modes(mix_kept_modes(rfft_modes(x, options_.modes), weight, options_.real_mixing),
                       grid);
  }
  std::vector<int64_t> grid = x.sizes().slice(2).vec();
  grid[0] = shard_->extent;
  const at::Tensor kept = dist_rfft_modes(x, options_.modes, *shard_);
  // This rank's part of the last kept-mode axis (the real storage's second to last), and the
  // weights of those modes.
  const IndexRange r = mode_range(options_.modes, *shard_);
  const at::Tensor w_local = d == 1 ? weight : weight.narrow(weight.dim() - 2, r.start, r.length);
  return dist_irfft_modes(mix_kept_modes(kept, w_local, options_.real_mixing), options_.modes, grid,
                          *shard_);
}

}  // namespace scaffold::fno
