// kernels::gelu_tanh against LibTorch's at::gelu(x, "tanh") computed in float64 (an independent
// reference: LibTorch's own formula, evaluated in double): forward and backward, float32 within
// 1e-6 of the largest magnitude plus 2e-6 relative, bfloat16 within one bfloat16 rounding of the
// float64 value; across the range where the tanh saturates, on sizes that split across threads
// and leave partial vectors, and non-contiguous inputs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/gelu.hpp"

namespace scaffold::kernels {
namespace {

struct Pass {
  at::Tensor y, dx;
};

Pass run(const at::Tensor& x0, const at::Tensor& g, bool ours) {
  const at::Tensor x = x0.detach().requires_grad_(true);
  const at::Tensor y = ours ? gelu_tanh(x) : at::gelu(x, "tanh");
  const at::Tensor dx = torch::autograd::grad({y}, {x}, {g})[0];
  return {y.detach(), dx};
}

// max |got - want| <= abs_tol * max |want| + rel_tol * |want| elementwise.
void expect_close(const at::Tensor& got, const at::Tensor& want, double abs_tol, double rel_tol,
                  const std::string& what) {
  const at::Tensor w = want.to(at::kDouble), d = (got.to(at::kDouble) - w).abs();
  const double scale = w.abs().max().item<double>();
  const at::Tensor bound = abs_tol * scale + rel_tol * w.abs();
  const at::Tensor over = d.gt(bound);
  EXPECT_FALSE(over.any().item<bool>())
      << what << ": " << over.sum().item<int64_t>() << " elements off, worst "
      << (d - bound).max().item<double>() << " over the bound";
}

TEST(GeluTanh, Float32EqualsLibTorchsInFloat64) {
  torch::manual_seed(3);
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{100003}}) {
    // Values across the whole curve: the negative tail where the gate vanishes, the bend, and
    // the positive side where it saturates.
    const at::Tensor x = at::randn({n}) * 4.0;
    const at::Tensor g = at::randn({n});
    const Pass ours = run(x, g, true), ref = run(x.to(at::kDouble), g.to(at::kDouble), false);
    EXPECT_EQ(ours.y.scalar_type(), at::kFloat);
    expect_close(ours.y, ref.y, 1e-6, 2e-6, "output, n " + std::to_string(n));
    expect_close(ours.dx, ref.dx, 1e-6, 2e-6, "gradient, n " + std::to_string(n));
  }
  // The tails themselves: exactly the identity far right, zero far left (within the bound).
  const at::Tensor tails = at::tensor({-60.f, -20.f, -9.f, 9.f, 20.f, 60.f});
  const Pass ours = run(tails, at::ones({6}), true);
  const Pass ref = run(tails.to(at::kDouble), at::ones({6}, at::kDouble), false);
  expect_close(ours.y, ref.y, 1e-7, 1e-6, "tails");
  expect_close(ours.dx, ref.dx, 1e-7, 1e-6, "tails' gradient");
}

TEST(GeluTanh, BFloat16IsTheFloat64ValueRounded) {
  torch::manual_seed(4);
  const at::Tensor x = (at::randn({4, 3001}) * 3.0).to(at::kBFloat16);
  const at::Tensor g = at::randn({4, 3001}).to(at::kBFloat16);
  const Pass ours = run(x, g, true);
  EXPECT_EQ(ours.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(ours.dx.scalar_type(), at::kBFloat16);
  const Pass ref = run(x.to(at::kDouble), g.to(at::kDouble), false);
  // One rounding to bfloat16 (8 significant bits: 2^-8 relative), plus the float computation.
  expect_close(ours.y, ref.y, 1e-6, 1.0 / 256, "bf16 output");
  expect_close(ours.dx, ref.dx, 1e-6, 1.0 / 256, "bf16 gradient");
}

TEST(GeluTanh, TakesNonContiguousInputsAndRefusesOthers) {
  torch::manual_seed(5);
  const at::Tensor x = at::randn({64, 48}).t();  // a transposed view
  const at::Tensor g = at::randn({48, 64});
  const Pass ours = run(x, g, true), ref = run(x.to(at::kDouble), g.to(at::kDouble), false);
  expect_close(ours.y, ref.y, 1e-6, 2e-6, "transposed output");
  expect_close(ours.dx, ref.dx, 1e-6, 2e-6, "transposed gradient");
  EXPECT_FALSE(gelu_tanh_supported(at::randn({3}, at::kDouble)));
  try {
    gelu_tanh(at::randn({2, 3}, at::kDouble));
    ADD_FAILURE() << "float64 was accepted";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("2x3 Double"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::kernels
