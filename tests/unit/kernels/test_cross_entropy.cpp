// kernels::cross_entropy_rows and kernels::linear_cross_entropy (the GPT's output layer and its
// loss as one node) against float64 references written from the definition: loss = logsumexp(z) -
// z_label, its gradient softmax(z) - onehot(label); the products' gradients through autograd in
// float64. Tolerances: the kernel's exponentials are within 3e-7 relative and its sums are float,
// so 2e-6 of the largest magnitude for the losses and the row gradients, and 1e-5 where a float32
// product of up to 70 terms follows (as test_dnnl_linear's).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/bf16_gemm.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dnnl_linear.hpp"
#include "nn/autocast.hpp"
#include "unit/kernels/conv_grads.hpp"
#include "unit/kernels/forced_bf16_products.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::conv_grads;
using model::test::ConvGrads;
using model::test::ForcedBf16Products;
using model::test::tensors_close;

// Rows of widths around the kernel's vector (16) and sum block (2048), logits spread far enough
// (+-40) that e^z overflows float without the row's maximum taken out.
TEST(CrossEntropyRows, LossAndGradientAreLogSumExpAndSoftmaxMinusOneHot) {
  at::manual_seed(21);
  for (const int64_t v : {1, 15, 16, 33, 2048, 2049, 5003}) {
    const int64_t n = 7;
    const at::Tensor z = at::randn({n, v}).mul_(v > 100 ? 15.0 : 3.0);
    z[2][v / 2] = 40.0;  // one dominant logit
    const at::Tensor labels = at::randint(v, {n}, at::kLong);
    labels[2] = v / 2;
    at::Tensor grad = z.clone();
    at::Tensor losses = at::empty({n});
    cross_entropy_rows(grad.data_ptr<float>(), n, v, labels.data_ptr<int64_t>(),
                       losses.data_ptr<float>());
    const at::Tensor z64 = z.to(at::kDouble);
    const at::Tensor want_loss =
        at::logsumexp(z64, 1) - z64.gather(1, labels.unsqueeze(1)).squeeze(1);
    const at::Tensor want_grad = at::softmax(z64, 1) - at::one_hot(labels, v).to(at::kDouble);
    const std::string what = "v " + std::to_string(v);
    // Absolute: losses near 0 (the dominant row) must be near 0.
    EXPECT_LE((losses.to(at::kDouble) - want_loss).abs().max().item<double>(),
              2e-6 * std::max(1.0, want_loss.abs().max().item<double>()))
        << what;
    EXPECT_TRUE(tensors_close(grad, want_grad, 2e-6, "row gradient " + what));
    // Each row's gradient sums to zero (the softmax sums to one).
    EXPECT_LE(grad.to(at::kDouble).sum(1).abs().max().item<double>(), 1e-5) << what;
  }
}

// Under CPU autocast to bf16 on a CPU with bf16 products (forced): x and w rounded to bf16, against
// the float64 definition on the rounded operands. On oneDNN's matmul the logits are float32 sums
// (losses within 1e-5); the two backward products read the gradient tensor and the scaled input
// rounded to bf16 (2^-9 relative each), so the gradients within 4e-3 of the largest magnitude.
// On at::mm (kernel LibTorch) the logits are rounded to bf16 too (as autocast's), so the losses
// and gradients within 1e-2. The gradients are float32, as x and w are.
TEST(LinearCrossEntropy, Bf16EqualsFloat64CrossEntropyOfTheRoundedOperands) {
  if (!bf16_gemm_available()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU or build";
  const ForcedBf16Products forced(1);
  at::manual_seed(23);
  const int64_t n = 29, k = 70, v = 4099;
  const at::Tensor x = at::randn({n, k}), w = at::randn({v, k}) * 0.3;
  const at::Tensor labels = at::randint(v, {n}, at::kLong);
  const at::Tensor g = at::randn({n});
  const auto rounded = [](const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kDouble); };
  const ConvGrads ref = conv_grads(
      rounded(x), rounded(w), g.to(at::kDouble), [&](const at::Tensor& a, const at::Tensor& b) {
        const at::Tensor z = at::linear(a, b);
        return at::logsumexp(z, 1) - z.gather(1, labels.unsqueeze(1)).squeeze(1);
      });
  nn::AutocastState bf16 = nn::AutocastState::current();
  bf16.cpu_enabled = true;
  bf16.cpu_dtype = at::kBFloat16;
  for (const GemmKernel kernel : {GemmKernel::OneDnn, GemmKernel::Probe, GemmKernel::LibTorch}) {
    const ConvGrads got = conv_grads(x, w, g, [&](const at::Tensor& a, const at::Tensor& b) {
      const nn::AutocastGuard autocast(bf16);
      return linear_cross_entropy(a, b, labels, kernel);
    });
    const std::string what = to_string(kernel);
    EXPECT_EQ(got.y.scalar_type(), at::kFloat);
    EXPECT_EQ(got.dx.scalar_type(), at::kFloat);
    EXPECT_EQ(got.dw.scalar_type(), at::kFloat);
    const bool rounded_logits = kernel == GemmKernel::LibTorch;
    EXPECT_TRUE(tensors_close(got.y, ref.y, rounded_logits ? 1e-2 : 1e-5, "losses " + what));
    EXPECT_TRUE(
        tensors_close(got.dx, ref.dx, rounded_logits ? 1e-2 : 4e-3, "input gradient " + what));
    EXPECT_TRUE(
        tensors_close(got.dw, ref.dw, rounded_logits ? 1e-2 : 4e-3, "weight gradient " + what));
  }
}

// 29 tokens, 70 features, a 4099-word vocabulary (ragged for every tile and block), per-token
// incoming gradients of both signs: each products' kernel against the float64 definition.
TEST(LinearCrossEntropy, EqualsFloat64CrossEntropyOfTheLinearInLossAndGradients) {
  at::manual_seed(22);
  const int64_t n = 29, k = 70, v = 4099;
  const at::Tensor x = at::randn({n, k}), w = at::randn({v, k}) * 0.3;
  const at::Tensor labels = at::randint(v, {n}, at::kLong);
  const at::Tensor g = at::randn({n});
  const ConvGrads ref =
      conv_grads(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
                 [&](const at::Tensor& a, const at::Tensor& b) {
                   const at::Tensor z = at::linear(a, b);
                   return at::logsumexp(z, 1) - z.gather(1, labels.unsqueeze(1)).squeeze(1);
                 });
  std::vector<GemmKernel> kernels = {GemmKernel::LibTorch, GemmKernel::Probe};
  if (dnnl_gemm_built()) kernels.push_back(GemmKernel::OneDnn);
  for (const GemmKernel kernel : kernels) {
    const ConvGrads got = conv_grads(x, w, g, [&](const at::Tensor& a, const at::Tensor& b) {
      return linear_cross_entropy(a, b, labels, kernel);
    });
    const std::string what = to_string(kernel);
    EXPECT_EQ(got.y.scalar_type(), at::kFloat);
    EXPECT_TRUE(tensors_close(got.y, ref.y, 1e-5, "losses " + what));
    EXPECT_TRUE(tensors_close(got.dx, ref.dx, 1e-5, "input gradient " + what));
    EXPECT_TRUE(tensors_close(got.dw, ref.dw, 1e-5, "weight gradient " + what));
  }
}

TEST(LinearCrossEntropy, RefusesWhatItCannotTakeNamingIt) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({10, 8});
  const at::Tensor labels = at::tensor(std::vector<int64_t>{0, 3, 9, 2});
  EXPECT_EQ(linear_cross_entropy_unsupported(x, w, labels), "");
  EXPECT_EQ(linear_cross_entropy_unsupported(x.to(at::kDouble), w.to(at::kDouble), labels),
            "not float32");
  EXPECT_EQ(linear_cross_entropy_unsupported(x.unsqueeze(0), w, labels),
            "the input is not a matrix");
  EXPECT_EQ(linear_cross_entropy_unsupported(x, w, labels.to(at::kInt)),
            "the labels are not one int64 per input row");
  EXPECT_EQ(linear_cross_entropy_unsupported(x, w, labels.narrow(0, 0, 3)),
            "the labels are not one int64 per input row");
  {
    const ForcedBf16Products forced(0);
    nn::AutocastState state = nn::AutocastState::current();
    state.cpu_enabled = true;
    state.cpu_dtype = at::kBFloat16;
    const nn::AutocastGuard autocast(state);
    EXPECT_EQ(linear_cross_entropy_unsupported(x, w, labels),
              "under CPU autocast on a CPU without bf16 products");
    forced.set(1);
    EXPECT_EQ(linear_cross_entropy_unsupported(x, w, labels), "");
    EXPECT_EQ(linear_cross_entropy_unsupported(x.to(at::kBFloat16), w, labels), "");
    EXPECT_EQ(linear_cross_entropy_unsupported(x.to(at::kDouble), w, labels),
              "not float32 or bf16");
    EXPECT_EQ(linear_cross_entropy_unsupported(x.unsqueeze(0), w, labels),
              "the input is not a matrix");
  }
  for (const int64_t bad : {int64_t{-1}, int64_t{10}}) {
    at::Tensor l = labels.clone();
    l[1] = bad;
    try {
      linear_cross_entropy(x, w, l, GemmKernel::LibTorch);
      ADD_FAILURE() << "label " << bad << " was taken";
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("a label outside [0, 10)"), std::string::npos)
          << e.what();
    }
  }
  try {
    linear_cross_entropy(x.to(at::kDouble), w.to(at::kDouble), labels, GemmKernel::LibTorch);
    ADD_FAILURE() << "float64 was taken";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not float32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::kernels
