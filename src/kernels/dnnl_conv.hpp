// Convolutions (no bias, no groups, no dilation) through oneDNN directly, forward and both
// backward passes, with the algorithm named: the direct kernel, or oneDNN's Winograd F(4x4, 3x3)
// for 2-D 3x3 stride-1 layers (float32 on AVX-512 CPUs; oneDNN says where it has one).
// - 3-D, direct: LibTorch 1.13 sends fp32 CPU convolutions of small 3-D layers at batch 1 to
//   slow_conv3d (im2col + GEMM, its backward too), 3-5x slower than oneDNN on the same layer; from
//   batch 2 on it uses oneDNN itself. Here every call goes to oneDNN.
// - 2-D, Winograd: LibTorch calls oneDNN's direct kernel only. On a 2-core Zen 4 oneDNN's Winograd
//   runs ResNet's 3x3 layers at 56^2..14^2 in about half the time, and not faster at 7^2
//   (docs/performance.md, "ResNet: oneDNN's Winograd"): kernels::choose_conv3x3
//   (winograd_conv2d.hpp) measures it per shape, beside our own F(4x4, 3x3).
// User tensors are wrapped as oneDNN memory without a copy; where a primitive wants another layout
// (its blocked nChw16c and the like) the data is reordered in and the result reordered out, as
// LibTorch's own oneDNN path does. Primitives are built once per shape and cached. The LibTorch
// convolution stays the reference (tests/unit/kernels/test_dnnl_conv.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace scaffold::kernels {

enum class DnnlAlgorithm { Direct, Winograd };

// Whether this build links oneDNN (SCAFFOLD_WITH_DNNL).
bool dnnl_conv3d_built();

// Whether this build's oneDNN has bfloat16 convolutions on this CPU: oneDNN 2.6 has them only
// with AVX-512 (an AMD Zen 3, AVX2 only, has none). Asked of oneDNN once per process, by building
// a small bf16 convolution's primitives.
bool dnnl_bf16_conv_available();

// True when this build has the oneDNN path and it can take these arguments: CPU tensors, x (N, C,
// D, H, W) and w (O, C, k, k, k) of one dtype, float32 or bfloat16 (where
// dnnl_bf16_conv_available), k odd. Anything else goes to at::conv3d.
bool dnnl_conv3d_supported(const at::Tensor& x, const at::Tensor& w);

// conv3d(x, w, stride 1, padding `padding` on every side), differentiable in x and w. The output
// has x's memory format (contiguous or channels-last 3-D). Throws core::Error when
// dnnl_conv3d_supported is false.
at::Tensor dnnl_conv3d(const at::Tensor& x, const at::Tensor& w, int64_t padding);

// True when oneDNN takes conv2d(x, w, stride, padding) with `algorithm` on this CPU: CPU tensors
// x (N, C, H, W) and w (O, C, kh, kw) of one dtype (float32 or bfloat16), and for Winograd an
// implementation for this shape (oneDNN's: float32, 3x3, stride 1, AVX-512). Asking builds and
// caches the shape's primitives.
bool dnnl_conv2d_supported(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                           at::IntArrayRef padding, DnnlAlgorithm algorithm);

// conv2d(x, w, stride, padding) (stride and padding: one value or one per side pair (h, w)) with
// `algorithm`, differentiable in x and w; the output has x's memory format (contiguous or
// channels-last). Throws core::Error when dnnl_conv2d_supported is false.
at::Tensor dnnl_conv2d(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                       at::IntArrayRef padding, DnnlAlgorithm algorithm);

// How much faster Winograd must measure to be chosen: a tie goes to LibTorch's convolution, the
// reference, which also needs less memory (at ResNet-50's 512-channel 7x7 layers, where the two
// measure within noise of each other on a Zen 4, Winograd's transforms raised the step's peak
// memory by ~190 MiB and its time by up to 10 %). The U-Net's 3-D Winograd (winograd_conv.hpp)
// is chosen with the same margin against oneDNN's direct 3-D kernel, and ResNet's probe
// (kernels::choose_conv3x3, winograd_conv2d.hpp) weighs both 2-D Winograds with it.
inline constexpr double kWinogradMargin = 0.9;

}  // namespace scaffold::kernels
