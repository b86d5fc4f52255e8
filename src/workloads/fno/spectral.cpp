#include "workloads/fno/spectral.hpp"

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <utility>

#include "core/error.hpp"
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
  const at::Tensor w = weight.reshape({ci, co, k, 2}).permute({2, 0, 3, 1});  // (K, Ci, 2, Co)
  const at::Tensor wr = w.select(2, 0), wi = w.select(2, 1);
  const at::Tensor wk = at::cat({at::cat({wr, wi}, 2), at::cat({-wi, wr}, 2)}, 1);
  std::vector<int64_t> shape{b, co};
  for (int64_t s : x.sizes().slice(2)) shape.push_back(s);
  // (K, B, 2 Co) -> (B, Co, K, 2) -> complex (B, Co, *K).
  const at::Tensor out = at::bmm(xk, wk).reshape({k, b, 2, co}).permute({1, 3, 0, 2});
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
  model::AutocastGuard autocast_off(model::AutocastState::current().disabled());
  // The weights' precision (float32; float64 in tests), whatever autocast made of the input.
  const at::Tensor x =
      x_in.scalar_type() == weight.scalar_type() ? x_in : x_in.to(weight.scalar_type());
  if (!shard_ || shard_->parts() == 1) {
    std::vector<int64_t> grid = x.sizes().slice(2).vec();
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
