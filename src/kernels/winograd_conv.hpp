// 3x3x3 convolution (stride 1, padding 1, no bias) by Winograd's minimal filtering F(2x2x2, 3x3x3),
// float32, forward and both backward passes. Each 2x2x2 output tile is computed from its 4x4x4
// input tile as A^T [ (G g G^T) (.) (B^T d B) ] A per dimension: 64 multiplications per input
// channel instead of 8 x 27 = 216, so the matrix products that carry the work shrink 3.375x. The
// 64 transformed points become 64 independent products (tiles x C_in) x (C_in x C_out), run per
// block of tiles in cache; the transforms are additions only (F(2,3)'s points are 0, +1, -1, so
// the result differs from a direct convolution by rounding alone). Weight gradients use the
// adjoint of the same map: dW = G^T [ sum over tiles (A dY A^T) (.) (B^T d B) ] G.
//
// Neither LibTorch 1.13 nor oneDNN has a 3-D Winograd convolution on the CPU (oneDNN's is 2-D);
// direct convolution (oneDNN, kernels/dnnl_conv.hpp) stays the reference it is tested against
// (tests/unit/kernels/test_winograd_conv.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace scaffold::kernels {

// True when winograd_conv3d can take these arguments: CPU float32 tensors, x (N, C, D, H, W),
// w (O, C, 3, 3, 3), C and O multiples of 16 (the vector width the kernels are written for).
bool winograd_conv3d_supported(const at::Tensor& x, const at::Tensor& w);

// Whether this layer gains from Winograd on this machine: supported, and its forward + both
// backward passes measured at least 1 / kWinogradMargin times faster than the direct convolution
// the layer would run otherwise (oneDNN's where built, else at::conv3d). Measured the first time
// a shape (sizes and memory format) is asked, on copies of the caller's tensors with autograd on
// (best of two after a warm-up), and remembered in kernels::probe_verdicts() (a checkpoint
// carries the verdict), whose line reads "conv3d x 1x32x16x16x16 ncdhw w 32x32x3x3x3: winograd
// 2.10 ms, onednn 3.30 ms -> winograd". Where it pays differs between CPUs (thin layers with few
// tiles spend more transforming the weights than the products save), so no rule is built in.
// A large layer is timed on the first winograd_probe_samples(x) samples of its batch, the key
// then ending ", timed on 1 of 2 samples".
bool winograd_conv3d_pays(const at::Tensor& x, const at::Tensor& w);

// The samples the probe times: enough for kProbeTiles 2x2x2 tiles (where the times grow with the
// batch in proportion), at most the batch. The probe's copies, outputs and gradients of a large
// layer's whole batch, made in the first step while every activation before it is live, set that
// step's peak memory (at 64^3 with 16 channels, batch 2: ~200 MB; docs/performance.md).
constexpr int64_t kProbeTiles = 4096;
int64_t winograd_probe_samples(const at::Tensor& x);

// The bound on the scratch of the schedule for wide layers (transformed input and products of a
// chunk of tiles; default 16 MiB), for the 3-D and the 2-D kernel (winograd_conv2d.hpp). Tests
// lower it to run several chunks on small inputs.
void set_winograd_chunk_bytes(int64_t bytes);
int64_t winograd_chunk_bytes();

// Forward calls of winograd_conv3d in this process (tests check which layers it ran).
int64_t winograd_conv3d_calls();

// conv3d(x, w, stride 1, padding 1), differentiable in x and w. Internally channels-last; the
// output has x's memory format. Throws core::Error when winograd_conv3d_supported is false.
at::Tensor winograd_conv3d(const at::Tensor& x, const at::Tensor& w);

}  // namespace scaffold::kernels
