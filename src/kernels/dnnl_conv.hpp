// 3-D convolution (stride 1, no bias, symmetric padding) through oneDNN directly, forward and
// both backward passes, whatever the batch size. LibTorch 1.13 sends fp32 CPU convolutions of
// small 3-D layers at batch 1 to slow_conv3d (im2col + GEMM, its backward too), 3-5x slower
// than oneDNN on the same layer; from batch 2 on it uses oneDNN itself. Here every call goes to
// oneDNN's own convolution primitives (the system libdnnl LibTorch links), with the tensors
// reordered into the layout oneDNN picks and back. Primitives are built once per shape and
// cached. The LibTorch convolution stays the reference (tests/unit/kernels/test_dnnl_conv.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace scaffold::model {

// True when this build has the oneDNN path (SCAFFOLD_WITH_DNNL) and it can take these
// arguments: CPU tensors, x (N, C, D, H, W) and w (O, C, k, k, k) of one dtype, float32 or
// bfloat16, k odd. Anything else goes to at::conv3d.
bool dnnl_conv3d_supported(const at::Tensor& x, const at::Tensor& w);

// conv3d(x, w, stride 1, padding `padding` on every side), differentiable in x and w. The
// output has x's memory format (contiguous or channels-last 3-D). Throws core::Error when
// dnnl_conv3d_supported is false.
at::Tensor dnnl_conv3d(const at::Tensor& x, const at::Tensor& w, int64_t padding);

// Whether this build links oneDNN for it.
bool dnnl_conv3d_built();

}  // namespace scaffold::model
