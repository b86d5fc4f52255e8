// A linear layer's three matrix products (y = x w^T + b forward; dx = dy w and dw = dy^T x
// backward) on oneDNN's sgemm, chosen per machine and per shape against LibTorch's at::linear.
//
// Why: LibTorch 1.13's float32 CPU products go to the BLAS it links (OpenBLAS on Debian), whose
// kernels depend on how the machine is set up (OPENBLAS_CORETYPE pins them: these VMs pin an AVX2
// core on an AVX-512 CPU, half the rate); oneDNN's sgemm picks its own ISA at run time. Which is
// faster differs by CPU, environment and shape, so `Probe` measures both once per shape in the
// process (the forward and both backward products) and takes oneDNN only where it is at least
// 10 % faster (docs/llm.md, "The matrix products' kernel").
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace scaffold::kernels {

class KernelUse;

enum class GemmKernel { LibTorch, OneDnn, Probe };
// "libtorch", "onednn", "probe": the config's and system.json's names.
const char* to_string(GemmKernel kernel);

// Whether this build has oneDNN's sgemm (libdnnl-dev at configure time).
bool dnnl_gemm_built();

// Whether dnnl_linear takes these: a CPU build with oneDNN, float32 CPU tensors, x (..., in) and w
// (out, in), not under CPU autocast (where at::linear runs the product in bf16).
bool dnnl_linear_supported(const at::Tensor& x, const at::Tensor& w);

// at::linear(x, w, b) (b may be undefined) with oneDNN's sgemm for the forward product and for
// both gradients; throws core::Error naming the arguments where !dnnl_linear_supported.
at::Tensor dnnl_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// oneDNN is kept where it is this much faster or better (the probe's time ratio): below it the
// two are within the machine's noise and LibTorch, the reference, stays.
inline constexpr double kGemmMargin = 0.9;

// The probe: whether oneDNN's three products of an (m x k) input `x` and an (n x k) weight `w`
// (float32, contiguous) are at least 1 / kGemmMargin times faster than LibTorch's (at::mm),
// measured once per shape in this process (best of 2 after a warm-up) and remembered in
// probe_verdicts(), whose line reads "gemm 1024x768 by 2304x768: onednn 6.10 ms, libtorch
// 13.20 ms -> onednn". It times the call's own x and w, so that it allocates only what the
// products write (an output-layer weight of a large model is hundreds of MB: a second one
// would raise the run's peak memory). False without oneDNN.
bool dnnl_gemm_pays(const at::Tensor& x, const at::Tensor& w);

// at::linear by `kernel`: LibTorch, oneDNN where it takes the arguments, or oneDNN where it takes
// them and the probe says it pays. Each call is counted in `use` (op "gemm") when given, with the
// reason when OneDnn had to leave a call to LibTorch.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, GemmKernel kernel,
                  KernelUse* use = nullptr);

}  // namespace scaffold::kernels
