// Many small matrix products at once: c[k] = a[k] b[k] over a batch of K pairs, differentiable in
// both. LibTorch 1.13's CPU bmm (in a build without MKL, as Debian's) calls one GEMM per batch
// entry through select and as_strided: for the FNO's per-mode products (512 products of
// (4 x 64) x (64 x 64) per layer at CARAML's RBC2D shape) that bookkeeping is most of the time,
// ~5.7 ms for forward + backward of one layer where the arithmetic needs well under 1 ms. Here
// each product is a plain loop nest over contiguous rows, the batch split over the threads,
// compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time. The LibTorch bmm stays
// the reference it is tested against (tests/unit/kernels/test_batched_matmul.cpp).
// Legend: K batch, M rows of a, I inner extent, N columns of b.
#pragma once

#include <ATen/core/Tensor.h>

namespace scaffold::kernels {

// True when batched_matmul takes these: CPU tensors of one dtype, float32 or float64, a (K, M, I)
// and b (K, I, N).
bool batched_matmul_supported(const at::Tensor& a, const at::Tensor& b);

// a (K, M, I) x b (K, I, N) -> (K, M, N), as at::bmm (any strides: the inputs are made
// contiguous). Throws core::Error when batched_matmul_supported is false.
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b);

}  // namespace scaffold::kernels
