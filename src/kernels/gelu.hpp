// GELU with the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT's
// activation, Megatron's bias-GELU), forward and backward in one vectorised pass each, float32 and
// bfloat16 on the CPU. LibTorch 1.13's CPU gelu(x, "tanh") and its backward run about 1.5 ns
// (float32) and 3-5 ns (bfloat16) an element on a 2-core Zen 4 (docs/performance.md): a GPT-2
// 124M step in bf16 spent 15 % of its time there.
//
// Written as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) (the same function: 1 + tanh(u) =
// 2 sigmoid(2u)), with e^y by range reduction and a degree-6 polynomial (relative error < 3e-7),
// so each ISA clone vectorises the loop. The derivative: s + 2 x s (1 - s) sqrt(2/pi)
// (1 + 3 * 0.044715 x^2), s = sigmoid(2u). bfloat16 is read and written as such (rounded to
// nearest even), computed in float. Tested against LibTorch's in float64
// (tests/unit/kernels/test_gelu.cpp).
#pragma once

#include <ATen/ATen.h>

namespace scaffold::kernels {

// Whether gelu_tanh takes x: a CPU tensor of float32 or bfloat16.
bool gelu_tanh_supported(const at::Tensor& x);

// at::gelu(x, "tanh"), differentiable in x; the output is contiguous, in x's dtype. Throws
// core::Error when gelu_tanh_supported is false.
at::Tensor gelu_tanh(const at::Tensor& x);

}  // namespace scaffold::kernels
