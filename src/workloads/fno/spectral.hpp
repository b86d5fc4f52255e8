// The Fourier layer's spectral convolution (Li et al., ICLR 2021): a real FFT of the input, the
// lowest `modes` frequencies of each dimension kept — both corners (non-negative and negative
// frequencies) of every dimension but the last, the non-negative ones of the last (the real FFT's
// half spectrum) — each kept mode's channels mixed by its own learned complex matrix, and the
// inverse FFT of the zero-filled spectrum. 1-D, 2-D and 3-D. The transforms are per axis, each
// truncated as soon as it is done, so later axes transform only the kept columns. Sharded inputs
// use the distributed transforms of dist_fft.hpp. Not here: the pointwise path and activation
// (fno.hpp).
// Legend: B batch, C channels, N_i grid extent of spatial dimension i, m_i modes kept in it, K
// the kept-mode extents (2 m_0, ..., 2 m_{d-2}, m_{d-1}).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/fno/dist_fft.hpp"

namespace scaffold::fno {

// K for `modes` (m_0, ..., m_{d-1}).
std::vector<int64_t> kept_mode_shape(const std::vector<int64_t>& modes);

// The first m and the last m entries of dimension `dim` side by side (2m entries): the
// frequencies 0..m-1 and -m..-1 of a full FFT axis. Needs 2m <= size.
at::Tensor keep_corners(const at::Tensor& t, int64_t dim, int64_t m);
// The inverse: 2m entries back at both ends of an axis of `size`, zeros in between.
at::Tensor place_corners(const at::Tensor& t, int64_t dim, int64_t size);
// The first m entries (the real FFT's last axis) and the inverse, zero-filled up to `size`.
at::Tensor keep_low(const at::Tensor& t, int64_t dim, int64_t m);
at::Tensor place_low(const at::Tensor& t, int64_t dim, int64_t size);

// x (B, C, N_0, ..., N_{d-1}) real -> (B, C, *K) complex: the kept modes of rfftn(x).
at::Tensor rfft_modes(const at::Tensor& x, const std::vector<int64_t>& modes);
// kept (B, C, *K) complex -> (B, C, *grid) real: irfftn of the spectrum that holds `kept` at the
// kept modes and zeros elsewhere (torch's "backward" normalisation, 1 / prod(grid)).
at::Tensor irfft_modes(const at::Tensor& kept, const std::vector<int64_t>& grid);

// rfft_modes and irfft_modes as truncated DFTs in real matrix products: each axis's transform
// is one GEMM with a (cos, sin) matrix of only the kept frequencies (the last axis: N x 2m, real
// to complex; the others: 2N x 2K on (real, imaginary) pairs), so nothing outside the kept modes
// is ever computed and the backward is the transposed products. Same contract and results (to
// rounding) as the FFT versions; cheaper when few modes are kept on a large grid (CARAML's RBC2D:
// 16 of 256 x 64), dearer when most are (see dft_pays). Unsharded tensors only.
at::Tensor rfft_modes_dft(const at::Tensor& x, const std::vector<int64_t>& modes);
at::Tensor irfft_modes_dft(const at::Tensor& kept, const std::vector<int64_t>& grid);

// Whether the DFT products beat the FFTs for x's shape and `modes` on this machine by
// kDftMargin: measured the first time a (shape, dtype, modes) is asked (the forward and inverse
// transform, forward and backward, three times each on x's values, with autograd on whatever the
// caller's mode), remembered for the process in kernels::probe_verdicts(), whose line reads
// "spectral x 4x32x256x64 Float modes 16x16: dft 2.10 ms, fft 7.30 ms -> dft".
inline constexpr double kDftMargin = 0.9;
bool dft_pays(const at::Tensor& x, const std::vector<int64_t>& modes);

// Per-mode channel mixing: x (B, Ci, *K) complex, weight (Ci, Co, *K) complex -> (B, Co, *K),
// out[b, o, k] = sum_i x[b, i, k] weight[i, o, k] (the paper's einsum "bi...,io...->bo...").
at::Tensor mix_modes(const at::Tensor& x, const at::Tensor& weight);

// The same product in real arithmetic, from the weight's real storage (Ci, Co, *K, 2): one real
// batched GEMM per kept mode, [xr, xi] (B, 2 Ci) times [[Wr, Wi], [-Wi, Wr]] (2 Ci, 2 Co).
// LibTorch 1.13's CPU bmm on complex operands copies every mode's matrices one by one (tens of
// thousands of small copies per FNO step); this form is one real bmm and a few whole-tensor copies,
// and autograd differentiates it without complex kernels.
at::Tensor mix_modes_real(const at::Tensor& x, const at::Tensor& weight);

struct SpectralConvOptions {
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  std::vector<int64_t> modes;  // m_i per spatial dimension; 1 to 3 entries
  // true: mix_modes_real; false: mix_modes (complex bmm, the reference).
  bool real_mixing = true;
  // How an unsharded layer transforms (sharded ones use dist_fft.hpp's FFTs): Fft: rfft_modes and
  // irfft_modes (the reference); Dft: the *_dft products; Probe: the DFT products where dft_pays.
  enum class Transform { Fft, Dft, Probe };
  Transform transform = Transform::Fft;
};

// "fft", "dft", "probe".
const char* to_string(SpectralConvOptions::Transform t);

class SpectralConvImpl : public torch::nn::Cloneable<SpectralConvImpl> {
 public:
  explicit SpectralConvImpl(SpectralConvOptions options);
  void reset() override;

  // x (B, Ci, *grid) -> (B, Co, *grid), grid the local shard's when sharded. Runs in the
  // weights' precision (float32) with autocast off (LibTorch 1.13's CPU FFT has no bfloat16): a
  // lower-precision input is cast up and the output stays float32.
  at::Tensor forward(const at::Tensor& x);

  // Shards the grid's first dimension over shard->group (null: unsharded, the default).
  void set_shard(std::shared_ptr<const FftShard> shard) { shard_ = std::move(shard); }

  // (Ci, Co, *K) complex view of the weight.
  at::Tensor complex_weight() const;

  const SpectralConvOptions& options() const { return options_; }

  // (Ci, Co, *K, 2) float32: the complex weights stored as (real, imaginary) pairs, initialised
  // as the paper's scale * rand(complex) with scale = 1 / (Ci Co). Real storage keeps every
  // parameter float32 for Adam (its moments then treat real and imaginary parts as PyTorch's
  // complex Adam does), the gradient all-reduce, checkpoints and the parameter count.
  at::Tensor weight;

 private:
  SpectralConvOptions options_;
  std::shared_ptr<const FftShard> shard_;
};
TORCH_MODULE(SpectralConv);

}  // namespace scaffold::fno
