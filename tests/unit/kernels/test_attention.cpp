// kernels::causal_attention against the plain formula computed by LibTorch in float64 (matmul,
// causal mask, softmax, matmul over the same QKV layout: an independent reference): outputs and
// the gradient of qkv. float32 within 2e-5 of the largest magnitude; bfloat16 against float64 on
// the same bf16-rounded inputs, within 2e-2 of the largest magnitude (our float32 inside, one
// rounding at the end; the bound covers the output's own bf16 rounding and that of the incoming
// gradient). Shapes: sequences shorter than a block, ending inside one, and spanning three; one
// and several heads; head sizes 16 to 64; a strided (non-contiguous) input; rotary embeddings.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

// x cos + [-x2, x1] sin over the last dimension, tables (S, d) by position.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor turned = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + turned * sin;
}

// The reference: Megatron's layout read with views, the causal softmax written out; with
// rotary tables (2, S, d), queries and keys rotated first.
at::Tensor plain_attention(const at::Tensor& qkv, int64_t heads, double scale,
                           const at::Tensor& rotary = {}) {
  const int64_t b = qkv.size(0), s = qkv.size(1), d = qkv.size(2) / (3 * heads);
  const at::Tensor x = qkv.view({b, s, heads, 3, d}).permute({3, 0, 2, 1, 4});
  at::Tensor q = x[0], k = x[1], v = x[2];  // (B, heads, S, d)
  if (rotary.defined()) {
    const at::Tensor tables = rotary.to(qkv.scalar_type());
    q = rotate(q, tables[0], tables[1]);
    k = rotate(k, tables[0], tables[1]);
  }
  const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  const at::Tensor probs = at::softmax(scores.masked_fill(future, -INFINITY), -1);
  return at::matmul(probs, v).transpose(1, 2).reshape({b, s, heads * d});
}

struct Pass {
  at::Tensor out, dqkv;
};

Pass run(const at::Tensor& qkv0, const at::Tensor& g, int64_t heads, bool ours,
         const at::Tensor& rotary = {}) {
  const at::Tensor qkv = qkv0.detach().requires_grad_(true);
  const double scale = 1.0 / std::sqrt(static_cast<double>(qkv.size(2) / (3 * heads)));
  const at::Tensor out = ours ? causal_attention(qkv, heads, scale, rotary)
                              : plain_attention(qkv, heads, scale, rotary);
  const at::Tensor dqkv = torch::autograd::grad({out}, {qkv}, {g})[0];
  return {out.detach(), dqkv};
}

// max |got - want| <= tol * max |want|.
void expect_close(const at::Tensor& got, const at::Tensor& want, double tol,
                  const std::string& what) {
  const at::Tensor w = want.to(at::kDouble);
  const double worst = (got.to(at::kDouble) - w).abs().max().item<double>();
  const double scale = w.abs().max().item<double>();
  EXPECT_LE(worst, tol * scale) << what << ": worst difference " << worst << ", largest value "
                                << scale;
}

using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // batch, sequence, heads, head size

std::string name(const Shape& s) {
  const auto [b, t, a, d] = s;
  return "B " + std::to_string(b) + " S " + std::to_string(t) + " heads " + std::to_string(a) +
         " d " + std::to_string(d);
}

const Shape kShapes[] = {{2, 1, 1, 16},   {1, 5, 2, 16},   {2, 64, 3, 16},
                         {1, 100, 2, 64}, {2, 130, 2, 32}, {1, 200, 1, 64}};

TEST(CausalAttention, Float32EqualsThePlainFormulaInFloat64) {
  torch::manual_seed(5);
  for (const Shape& shape : kShapes) {
    const auto [b, s, heads, d] = shape;
    const at::Tensor qkv = at::randn({b, s, heads * 3 * d}) * 2.0;  // peaked softmax rows too
    const at::Tensor g = at::randn({b, s, heads * d});
    const Pass ref = run(qkv.to(at::kDouble), g.to(at::kDouble), heads, false);
    // The products' register tiles for AVX-512 (1) and for AVX2 (0), whichever this CPU has.
    for (const int wide : {0, 1}) {
      kernels::simd::force_wide_registers(wide);
      const Pass ours = run(qkv, g, heads, true);
      const std::string what = name(shape) + (wide ? ", AVX-512 tiles" : ", AVX2 tiles");
      EXPECT_EQ(ours.out.scalar_type(), at::kFloat);
      EXPECT_EQ(ours.out.sizes(), ref.out.sizes());
      expect_close(ours.out, ref.out, 2e-5, "output, " + what);
      expect_close(ours.dqkv, ref.dqkv, 2e-5, "gradient, " + what);
    }
    kernels::simd::force_wide_registers(-1);
  }
}

TEST(CausalAttention, BFloat16EqualsThePlainFormulaOnTheSameInputs) {
  torch::manual_seed(6);
  for (const Shape& shape : kShapes) {
    const auto [b, s, heads, d] = shape;
    const at::Tensor qkv = at::randn({b, s, heads * 3 * d}).to(at::kBFloat16);
    const at::Tensor g = at::randn({b, s, heads * d}).to(at::kBFloat16);
    const Pass ours = run(qkv, g, heads, true);
    const Pass ref = run(qkv.to(at::kDouble), g.to(at::kDouble), heads, false);
    EXPECT_EQ(ours.out.scalar_type(), at::kBFloat16);
    EXPECT_EQ(ours.dqkv.scalar_type(), at::kBFloat16);
    expect_close(ours.out, ref.out, 1e-2, "output, " + name(shape));
    expect_close(ours.dqkv, ref.dqkv, 1e-2, "gradient, " + name(shape));
  }
}

TEST(CausalAttention, RotatesQueriesAndKeysByTheTablesItIsGiven) {
  // Tables of Megatron's rotary embedding, base 10000, built here in float64; the kernel takes
  // their float32 values, the reference the same values in float64.
  torch::manual_seed(9);
  for (const Shape& shape : {Shape{2, 100, 2, 32}, Shape{1, 130, 1, 64}}) {
    const auto [b, s, heads, d] = shape;
    const at::Tensor inv_freq = at::pow(10000.0, -at::arange(0, d, 2, at::kDouble) / d);
    const at::Tensor angles = at::outer(at::arange(s, at::kDouble), inv_freq);
    const at::Tensor emb = at::cat({angles, angles}, -1);
    const at::Tensor rotary = at::stack({emb.cos(), emb.sin()}).to(at::kFloat);
    const at::Tensor qkv = at::randn({b, s, heads * 3 * d}) * 2.0;
    const at::Tensor g = at::randn({b, s, heads * d});
    const Pass ours = run(qkv, g, heads, true, rotary);
    const Pass ref = run(qkv.to(at::kDouble), g.to(at::kDouble), heads, false, rotary);
    expect_close(ours.out, ref.out, 2e-5, "output, " + name(shape));
    expect_close(ours.dqkv, ref.dqkv, 2e-5, "gradient, " + name(shape));
    // Not the unrotated attention: the tables were applied.
    const Pass plain = run(qkv.to(at::kDouble), g.to(at::kDouble), heads, false);
    EXPECT_GT((ours.out.to(at::kDouble) - plain.out).abs().max().item<double>(), 1e-2);
  }
  EXPECT_NE(
      causal_attention_unsupported(at::randn({1, 4, 96}), 2, at::randn({2, 5, 16})).find("rotary"),
      std::string::npos);
}

TEST(CausalAttention, EachQueryIgnoresTheKeysAfterIt) {
  // Changing the last token's key and value leaves every earlier output as it was, bit for bit.
  torch::manual_seed(7);
  const int64_t heads = 2, d = 16, s = 70;
  const at::Tensor qkv = at::randn({1, s, heads * 3 * d});
  const at::Tensor changed = qkv.clone();
  changed.select(1, s - 1).add_(at::randn({heads * 3 * d}) * 5.0);
  const at::Tensor a = causal_attention(qkv, heads, 0.25),
                   b = causal_attention(changed, heads, 0.25);
  EXPECT_TRUE(at::equal(a.narrow(1, 0, s - 1), b.narrow(1, 0, s - 1)));
  EXPECT_FALSE(at::equal(a.select(1, s - 1), b.select(1, s - 1)));
}

TEST(CausalAttention, TakesANonContiguousInput) {
  torch::manual_seed(8);
  const int64_t heads = 2, d = 16;
  const at::Tensor wide = at::randn({3, 40, heads * 3 * d * 2});
  const at::Tensor qkv = wide.narrow(2, 0, heads * 3 * d);  // rows with a gap after each
  ASSERT_FALSE(qkv.is_contiguous());
  const at::Tensor g = at::randn({3, 40, heads * d});
  const Pass ours = run(qkv, g, heads, true);
  const Pass ref = run(qkv.to(at::kDouble), g.to(at::kDouble), heads, false);
  expect_close(ours.out, ref.out, 2e-5, "output");
  expect_close(ours.dqkv, ref.dqkv, 2e-5, "gradient");
}

TEST(CausalAttention, RefusesWhatItCannotTakeWithTheReason) {
  EXPECT_EQ(causal_attention_unsupported(at::randn({1, 4, 96}), 2), "");
  EXPECT_NE(causal_attention_unsupported(at::randn({1, 4, 96}, at::kDouble), 2).find("float32"),
            std::string::npos);
  EXPECT_NE(causal_attention_unsupported(at::randn({1, 4, 48}), 2).find("head size 8"),
            std::string::npos);
  EXPECT_NE(causal_attention_unsupported(at::randn({4, 96}), 2).find("heads * 3 * d"),
            std::string::npos);
  EXPECT_NE(causal_attention_unsupported(at::randn({1, 4, 100}), 2).find("heads * 3 * d"),
            std::string::npos);
  try {
    causal_attention(at::randn({1, 4, 48}), 2, 1.0);
    FAIL() << "head size 8 was taken";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("1x4x48"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::kernels
