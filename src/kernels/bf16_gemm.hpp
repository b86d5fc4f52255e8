// Matrix products of bf16 operands with float32 sums on oneDNN's matmul primitive, writing float32
// or bf16: the bf16 linear layers' kernel on CPUs with bf16 products (kernels/dnnl_linear.hpp).
//
// Why not at::mm on bf16 tensors: LibTorch 1.13 reaches the same oneDNN kernels through its ideep
// layer, which writes bf16 only (a float32 weight gradient then costs a second pass to widen it);
// the bf16 GPT step measured 7-11 % faster on this primitive on a Zen 5 (docs/llm.md, "bf16
// products on oneDNN's matmul").
#pragma once

#include <cstdint>

namespace scaffold::kernels {

// Whether bf16_gemm runs here: a build with oneDNN (libdnnl-dev at configure time) on a CPU it has
// bf16 matmul kernels for (oneDNN 2.6: AVX-512; none on an AVX2 CPU). Decided once, by building a
// small primitive; elsewhere bf16_gemm throws.
bool bf16_gemm_available();

// What bf16_gemm writes.
enum class Bf16GemmOut { Float32, BFloat16 };

// C (m x n, row-major, leading dimension ldc) = op(A) op(B) [+ C] [+ bias], where op(A) is m x k
// (A row-major with leading dimension lda, read transposed when trans_a) and op(B) is k x n
// (likewise). A, B and the bias (n values, or null) are bf16 bit patterns; the products are
// exact in float32 and summed in float32; C is float32 or bf16 (`out`, rounded to nearest even).
// `accumulate` adds to C's float32 contents (not for a bf16 C). An extent over 16 384 is split
// into equal pieces, each a product of its own (a float32 C adds the reduction's pieces). One
// primitive per piece shape and layout, built on first use and kept (up to 256). A core::Error
// names the shape where oneDNN fails or accumulate asks for a bf16 C.
void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, void* c, int64_t ldc, Bf16GemmOut out,
               bool accumulate = false, const uint16_t* bias = nullptr);

}  // namespace scaffold::kernels
