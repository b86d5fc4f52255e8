// A float32 matrix product of our own for the few-token products of a GPT step: C = op(A) op(B),
// blocked for the caches and packed (the operands copied into the register tiles' order, so the
// product reads both sequentially), on register tiles of 6 rows by 16 floats with AVX (its own)
// or by 64 with AVX-512 (the Winograd products', winograd_gemm.hpp), in the kernels' clones.
//
// Why: at 256 tokens against 2048-8192-wide weights (the 800M preset at 2 x 128) OpenBLAS and
// oneDNN run their sgemm at ~68 % of the CPU's multiply-add peak on an AVX2 Zen 3, which bounds
// the step (docs/performance.md). This one measured 0.77-1.08 of OpenBLAS's time there, by shape
// and product: it is a third candidate of dnnl_linear.hpp's per-shape, per-product probe, so it
// runs only where it measured faster in the process. LibTorch's at::mm is its tests' reference.
#pragma once

#include <cstdint>

namespace scaffold::kernels {

// C (m x n, row stride ldc) = op(A) op(B), plus C's values when `accumulate`. Row-major float32:
// op(A) is m x k, A itself (m x k, row stride lda) or with trans_a the transpose of A (k x m);
// op(B) is k x n, B (k x n, ldb) or with trans_b the transpose of B (n x k). The work is split
// over LibTorch's intra-op threads along the larger of m and n. k may be 0 (C = 0, or unchanged
// when accumulating).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

}  // namespace scaffold::kernels
