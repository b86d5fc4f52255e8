// 3x3 convolution (stride 1, padding 1, no bias) by Winograd's minimal filtering F(4x4, 3x3),
// float32, channels-last, forward and both backward passes: ResNet's 3x3 layers on a CPU where
// oneDNN has no Winograd of its own (oneDNN 2.6's needs AVX-512). Each 4x4 output tile is
// computed from its 6x6 input tile as A^T [ (G g G^T) (.) (B^T d B) ] A: 36 multiplications per
// input channel instead of 16 x 9 = 144, so the matrix products that carry the work shrink 4x.
// The 36 transformed points become 36 independent products (tiles x C_in) x (C_in x C_out) on a
// block of tiles in cache, as in the 3-D kernel (winograd_conv.hpp). F(4,3)'s interpolation
// points are 0, +-1, +-2 and infinity, so unlike F(2,3) its transforms multiply (by 4, 5, 1/6,
// 1/24, ...) and the result differs from a direct convolution by more than one rounding: ~1e-6 of
// the output's scale in float32 (tests/unit/kernels/test_winograd_conv2d.cpp states the bound).
// Weight gradients use the adjoint of the same map: dW = G^T [ sum over tiles (A dY A^T) (.)
// (B^T d B) ] G.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace scaffold::kernels {

// True when winograd_conv2d can take these arguments: CPU float32 tensors, x (N, C, H, W) dense
// channels-last, w (O, C, 3, 3), C and O multiples of 16 (the vector width of the kernels).
bool winograd_conv2d_supported(const at::Tensor& x, const at::Tensor& w);

// Forward calls of winograd_conv2d in this process (tests check which layers it ran).
int64_t winograd_conv2d_calls();

// conv2d(x, w, stride 1, padding 1), differentiable in x and w; the output is channels-last.
// Throws core::Error when winograd_conv2d_supported is false.
at::Tensor winograd_conv2d(const at::Tensor& x, const at::Tensor& w);

// The same function without counting the call: what a probe times (winograd_conv2d_calls
// counts the model's layers only).
at::Tensor winograd_conv2d_uncounted(const at::Tensor& x, const at::Tensor& w);

// The kernels of a 3x3, stride-1, padding-1 convolution on a CPU in float32 (ResNet's).
enum class Conv3x3Kernel { LibTorch, DnnlWinograd, NativeWinograd };

// "libtorch" (at::conv2d: oneDNN's direct kernel), "winograd" (oneDNN's Winograd,
// kernels/dnnl_conv.hpp: AVX-512 only), "native_winograd" (winograd_conv2d).
const char* to_string(Conv3x3Kernel k);

// The fastest kernel for this layer on this machine, among those that take it: each measured
// forward + backward (autograd on copies of the caller's tensors, best of two after a warm-up)
// the first time a shape (sizes, layout, dtype) is asked, and remembered in probe_verdicts()
// (a checkpoint carries the verdict), whose line reads "conv x 8x64x56x56 nhwc Float w
// 64x64x3x3 s1x1 p1x1: native_winograd 8.02 ms, libtorch 15.47 ms -> native_winograd". A
// Winograd is chosen only where it measures at least 1 / kWinogradMargin times faster than
// LibTorch's (the reference, which needs less memory), the faster of two that do; LibTorch's,
// unmeasured, where neither takes the layer.
Conv3x3Kernel choose_conv3x3(const at::Tensor& x, const at::Tensor& w);

}  // namespace scaffold::kernels
