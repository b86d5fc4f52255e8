// A 1x1, stride-1 convolution of a channels-last tensor is a matrix product: the input's memory is
// the (N H W) x C matrix of its pixels, the output's the (N H W) x O one, and the weight the O x C
// matrix of a linear layer. So the linear layer's kernels (kernels/dnnl_linear.hpp: at::mm,
// oneDNN's sgemm or our own, chosen per product by the GEMM probe) can run it, forward and both
// gradients, without the convolution's layout handling. Whether that is faster than LibTorch's
// convolution (oneDNN's 1x1 kernel) depends on the CPU and the shape: measured on a Zen 5 (2
// threads, ResNet-50's 1x1 layers at batch 8, forward + backward), 0.73-0.90x at 56x56 and 28x28
// and at 7x7 with 2048 channels, level at 14x14 (docs/image_classification.md, "1x1 convolutions
// as matrix products"). choose_conv1x1 measures it per shape.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace scaffold::kernels {

// Why conv1x1_as_gemm does not take these ("" when it does): CPU float32 tensors, not under CPU
// autocast, x (N, C, H, W) channels-last, w (O, C, 1, 1).
std::string conv1x1_gemm_unsupported(const at::Tensor& x, const at::Tensor& w);

// conv2d(x, w) (stride 1, no padding, no bias) as the linear layer of x's pixels by w, each of its
// three products on the kernel the GEMM probe chose for the shape (kernels::gemm_choice);
// differentiable in x and w; the output channels-last. A core::Error names the arguments where
// conv1x1_gemm_unsupported.
at::Tensor conv1x1_as_gemm(const at::Tensor& x, const at::Tensor& w);

// The kernel for this shape: "gemm" (conv1x1_as_gemm) where its forward and backward measure at
// least 10 % faster than at::conv2d's (kGemmMargin), else "libtorch"; measured once per shape in
// the process (probe_verdicts(), system.json's kernel_probes: "conv1x1 x 8x64x56x56 w 256x64x1x1:
// gemm 4.10 ms, libtorch 5.60 ms -> gemm"), on the first images of x whose pixels fill one block
// of the products' rows (kGemmRowsPerProduct; at least one image), through probe_leaf. Calls
// conv1x1_gemm_unsupported first: "libtorch" where it is not empty.
std::string choose_conv1x1(const at::Tensor& x, const at::Tensor& w);

// A probe's autograd leaf holding a call's tensor `t`, for timing forward and backward passes on
// it (with grad mode on and inference mode off): `t` itself, detached, where it is a training
// call's (the first step's activations are alive while the probe runs: a copy of a 56x56 layer's
// input at batch 32 would be 100 MB more at that peak), a copy where it is an inference tensor
// (validation), which cannot take part in autograd.
at::Tensor probe_leaf(const at::Tensor& t);

}  // namespace scaffold::kernels
