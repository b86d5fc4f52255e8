// A convolution's output and the gradients of sum(y * g) by autograd, for the kernel tests that
// compare a kernel with a reference convolution (test_dnnl_conv, test_winograd_conv,
// test_winograd_conv2d), or any op of an input and a weight with one (test_cross_entropy).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

namespace scaffold::model::test {

struct ConvGrads {
  at::Tensor y, dx, dw;
};

// y = conv(x, w) on detached copies that require grad; g is cast to y's dtype (a bf16 kernel
// against a float32 g).
template <typename Conv>
ConvGrads conv_grads(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& g, Conv conv) {
  const at::Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
  const at::Tensor y = conv(x, w);
  const auto grads = torch::autograd::grad({y}, {x, w}, {g.to(y.scalar_type())});
  return {y, grads[0], grads[1]};
}

}  // namespace scaffold::model::test
