// Causal self-attention as one pass forward and one backward, tiled in the manner of
// FlashAttention-2 for a CPU: per head, 64-query blocks against 64-key blocks with an online
// softmax (running maximum and sum, the output rescaled as they grow), so the S x S scores and
// probabilities exist one 64 x 64 tile at a time and are never stored. The backward recomputes
// each tile's probabilities from the saved row log-sum-exps (B x heads x S floats) instead of
// keeping them, and key blocks above the diagonal are skipped both ways.
//
// It reads the fused QKV projection in place (Megatron's layout: each head's query, key and value
// side by side, qkv.view(B, S, heads, 3, d)) and writes the heads' outputs side by side, (B, S,
// heads * d), the next linear layer's input: no permute, select or transpose copies around it, and
// the gradient comes back in qkv's layout. float32 or bfloat16 in and out, float32 inside (the
// softmax in float32, as Megatron's attention_softmax_in_fp32). The products are register-blocked
// loops over 16-float vectors compiled for AVX-512, AVX2 and baseline x86-64 and picked at load
// time. LibTorch's matmul/softmax path is the reference it is tested against
// (tests/unit/kernels/test_attention.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace scaffold::kernels {

// Why causal_attention cannot take these arguments, "" when it can: qkv must be a CPU tensor of
// float32 or bfloat16 shaped (B, S, heads * 3 * d), d a multiple of 16; rotary, when defined, the
// (2, S, d) float32 cos and sin tables.
std::string causal_attention_unsupported(const at::Tensor& qkv, int64_t heads,
                                         const at::Tensor& rotary = {});

// softmax(q k^T * scale, keys after the query masked out) v for each head, the heads' outputs side
// by side: (B, S, heads * d) in qkv's dtype. With `rotary` (cos = rotary[0], sin = rotary[1],
// each (S, d), position by row), queries and keys are first rotated as Megatron's rotary
// embedding does, x cos + [-x2, x1] sin. Differentiable in qkv. Throws core::Error naming the
// reason when causal_attention_unsupported is not empty.
at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads, double scale,
                            const at::Tensor& rotary = {});

}  // namespace scaffold::kernels
