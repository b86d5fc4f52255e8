// The GPT model against independent references: GPT-2 small's published parameter count
// (124,439,808) and the presets' counts against the module's tensors and against the NVIDIA
// paper's form 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)); causality (tokens after t leave the
// logits up to t unchanged, tokens before t do not); the first loss from a random init near
// ln(V); the fused attention against the plain one; the cross-entropy against at::cross_entropy;
// rotary embeddings' relative-position property; recompute none = selective = full; and the
// loss falling on a tiny repeated corpus through the task and the shared loop.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "kernels/bf16_gemm.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/kernel_use.hpp"
#include "nn/autocast.hpp"
#include "train/loop.hpp"
#include "unit/kernels/forced_bf16_products.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/task.hpp"

namespace scaffold::llm {
namespace {

using model::test::ForcedBf16Products;
using model::test::tensors_close;

class GptEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    at::set_num_threads(1);
    runtime() = std::make_unique<dist::Runtime>(nullptr, nullptr);
  }
  void TearDown() override { runtime().reset(); }
  static std::unique_ptr<dist::Runtime>& runtime() {
    static std::unique_ptr<dist::Runtime> r;
    return r;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new GptEnvironment);

GptOptions small_options(PositionEmbedding pe = PositionEmbedding::kLearned,
                         AttentionImpl attn = AttentionImpl::kPlain) {
  GptOptions o;
  o.num_layers = 2;
  o.hidden_size = 32;
  o.num_attention_heads = 4;
  o.ffn_hidden_size = 128;
  o.seq_length = 16;
  o.padded_vocab_size = 128;
  o.position_embedding = pe;
  o.attention = attn;
  o.init_method_std = 0.05;
  return o;
}

int64_t module_parameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(GptParameters, Gpt2SmallHasItsPublishedCount) {
  // GPT-2 small: vocabulary 50257 (unpadded), 1024 positions, 12 x 768, tied embeddings.
  GptOptions o;
  o.padded_vocab_size = padded_vocab_size(50257, 1, 1);
  torch::manual_seed(0);
  Gpt gpt(o);
  EXPECT_EQ(module_parameters(*gpt), 124439808);
  EXPECT_EQ(gpt_parameter_count(o), 124439808);
}

TEST(GptParameters, PaddedVocabularyAsMegatron) {
  EXPECT_EQ(padded_vocab_size(50257, 128, 1), 50304);
  EXPECT_EQ(padded_vocab_size(50257, 128, 2), 50432);
  EXPECT_EQ(padded_vocab_size(50257, 128, 8), 51200);
  EXPECT_EQ(padded_vocab_size(50304, 128, 1), 50304);
}

// 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)) for learned positions (NVIDIA's "Efficient
// Large-Scale Language Model Training", eq. 2 with the final LayerNorm's 2h added), FFN = 4h.
double paper_count(double layers, double h, double vocab, double seq) {
  return 12 * layers * h * h * (1 + 13 / (12 * h) + (vocab + seq) / (12 * layers * h)) + 2 * h;
}

TEST(GptParameters, PresetsMatchTheClosedFormAndThePaper) {
  struct Case {
    int64_t layers, hidden, heads, ffn, seq;
    double published;  // 0: none to compare with
  };
  // 117M, 800M, 13B (FFN 20480 = 4h), 175B (GPT-3: "175B", 174.6e9 with V = 50304).
  const std::vector<Case> cases{{12, 768, 12, 3072, 1024, 124.4e6},
                                {16, 2048, 8, 8192, 2048, 0},
                                {40, 5120, 32, 20480, 2048, 13e9},
                                {96, 12288, 96, 49152, 2048, 175e9}};
  for (const Case& c : cases) {
    GptOptions o;
    o.num_layers = c.layers;
    o.hidden_size = c.hidden;
    o.num_attention_heads = c.heads;
    o.ffn_hidden_size = c.ffn;
    o.seq_length = c.seq;
    o.padded_vocab_size = 50304;
    const double paper = paper_count(c.layers, c.hidden, 50304, c.seq);
    EXPECT_NEAR(static_cast<double>(gpt_parameter_count(o)), paper, 0.5) << "hidden " << c.hidden;
    if (c.published > 0) {
      // The names are rounded ("13B" is 12.85e9 at hidden 5120): within 2 %.
      EXPECT_NEAR(paper / c.published, 1.0, 0.02) << "hidden " << c.hidden;
    }
    o.position_embedding = PositionEmbedding::kRope;  // no position table
    EXPECT_EQ(gpt_parameter_count(o), static_cast<int64_t>(std::llround(paper)) - c.seq * c.hidden);
  }
  // The module's tensors for one layer at the 800M width (the count is linear in layers).
  GptOptions wide;
  wide.num_layers = 1;
  wide.hidden_size = 2048;
  wide.num_attention_heads = 8;
  wide.ffn_hidden_size = 8192;
  wide.seq_length = 2048;
  wide.padded_vocab_size = 50304;
  wide.position_embedding = PositionEmbedding::kRope;
  torch::manual_seed(0);
  Gpt gpt(wide);
  EXPECT_EQ(module_parameters(*gpt), gpt_parameter_count(wide));
  GptOptions tiny = small_options();
  torch::manual_seed(0);
  Gpt small(tiny);
  EXPECT_EQ(module_parameters(*small), gpt_parameter_count(tiny));
}

// Logits at positions <= t do not change when tokens after t do; they do when a token <= t does.
TEST(GptModel, IsCausal) {
  for (auto pe : {PositionEmbedding::kLearned, PositionEmbedding::kRope})
    for (auto attn : {AttentionImpl::kPlain, AttentionImpl::kFused}) {
      torch::manual_seed(1);
      Gpt gpt(small_options(pe, attn));
      gpt->eval();
      torch::NoGradGuard no_grad;
      const at::Tensor tokens = at::randint(128, {2, 16}, at::kLong);
      constexpr int64_t t = 6;
      at::Tensor later = tokens.clone();
      later.narrow(1, t + 1, 16 - t - 1).random_(128);
      at::Tensor earlier = tokens.clone();
      earlier.select(1, t).add_(1).remainder_(128);
      const at::Tensor a = gpt->forward(tokens), b = gpt->forward(later), c = gpt->forward(earlier);
      const std::string what =
          std::string(pe == PositionEmbedding::kRope ? "rope" : "learned") + "/" + to_string(attn);
      EXPECT_TRUE(
          tensors_close(b.narrow(1, 0, t + 1), a.narrow(1, 0, t + 1), 1e-6, what + " logits <= t"));
      EXPECT_GT((c.narrow(1, t, 1) - a.narrow(1, t, 1)).abs().max().item<double>(), 1e-4) << what;
      EXPECT_GT((b.narrow(1, t + 1, 16 - t - 1) - a.narrow(1, t + 1, 16 - t - 1))
                    .abs()
                    .max()
                    .item<double>(),
                1e-4)
          << what;
    }
}

TEST(GptModel, FirstLossFromARandomInitIsNearLnV) {
  GptOptions o = small_options();
  o.num_layers = 4;
  o.hidden_size = 128;
  o.ffn_hidden_size = 512;
  o.seq_length = 64;
  o.padded_vocab_size = 50304;
  o.init_method_std = 0.02;
  torch::manual_seed(2);
  Gpt gpt(o);
  torch::NoGradGuard no_grad;
  const at::Tensor tokens = at::randint(50257, {2, 65}, at::kLong);
  const double loss =
      gpt->token_losses(tokens.narrow(1, 0, 64), tokens.narrow(1, 1, 64)).mean().item<double>();
  // Logits of std ~ sqrt(h) x 0.02 = 0.23 add ~ var/2 = 0.03 to ln V = 10.826.
  EXPECT_NEAR(loss, std::log(50304.0), 0.1);
}

TEST(GptModel, FusedAttentionAgreesWithThePlainOne) {
  torch::manual_seed(3);
  const auto make = [] { return at::randn({2, 4, 24, 16}).requires_grad_(true); };
  const at::Tensor q = make(), k = make(), v = make();
  const at::Tensor g = at::randn({2, 4, 24, 16});
  std::vector<at::Tensor> outs, grads;
  for (auto impl : {AttentionImpl::kPlain, AttentionImpl::kFused}) {
    for (const auto& x : {q, k, v}) x.mutable_grad() = at::Tensor();
    const at::Tensor out = causal_attention(q, k, v, impl, 0.0, true);
    (out * g).sum().backward();
    outs.push_back(out.detach());
    for (const auto& x : {q, k, v}) grads.push_back(x.grad().clone());
  }
  EXPECT_TRUE(tensors_close(outs[1], outs[0], 1e-5, "attention output"));
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(tensors_close(grads[3 + i], grads[i], 1e-5, "gradient " + std::to_string(i)));
  // And both are causal attention: position 0 attends only to itself, so its output is v's row 0.
  EXPECT_TRUE(tensors_close(outs[0].select(2, 0), v.detach().select(2, 0), 1e-6, "first position"));
}

// The native attention inside the model: a training step's loss and every parameter's gradient
// against the plain attention's, float32 (within 2e-5 of each gradient's largest magnitude: the
// kernel sums in another order), and counted in kernel_use. Sequence 70: two query blocks, the
// second partial; head size 16.
void expect_native_attention_step_equals_plain(PositionEmbedding pe) {
  GptOptions o = small_options(pe);
  o.hidden_size = 64;
  o.ffn_hidden_size = 256;
  o.seq_length = 70;
  torch::manual_seed(9);
  const at::Tensor tokens = at::randint(128, {2, 71}, at::kLong);
  std::vector<at::Tensor> losses;
  std::vector<std::vector<at::Tensor>> grads;
  std::shared_ptr<kernels::KernelUse> use;
  for (auto attn : {AttentionImpl::kPlain, AttentionImpl::kNative}) {
    o.attention = attn;
    o.kernel_use = std::make_shared<kernels::KernelUse>();
    torch::manual_seed(10);
    Gpt gpt(o);
    const at::Tensor loss =
        gpt->token_losses(tokens.narrow(1, 0, 70), tokens.narrow(1, 1, 70)).mean();
    loss.backward();
    losses.push_back(loss.detach());
    grads.emplace_back();
    for (const auto& p : gpt->parameters()) grads.back().push_back(p.grad().clone());
    use = o.kernel_use;
  }
  EXPECT_NEAR(losses[1].item<double>(), losses[0].item<double>(), 1e-6);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(tensors_close(grads[1][i], grads[0][i], 2e-5, "gradient " + std::to_string(i)));
  const auto summary = use->summary();
  EXPECT_NE(std::find(summary.begin(), summary.end(), "attention=native x2"), summary.end())
      << (summary.empty() ? "" : summary.front());
}

TEST(GptModel, AutoAttentionIsNativeWhereItCanRun) {
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);
  const std::string ok = native_attention_unsupported(cpu, 0.0, 64);
  EXPECT_EQ(ok, "");
  EXPECT_EQ(parse_attention("auto", ok), AttentionImpl::kNative);
  EXPECT_EQ(parse_attention("native", ok), AttentionImpl::kNative);
  EXPECT_EQ(parse_attention("plain", ok), AttentionImpl::kPlain);
  EXPECT_EQ(parse_attention("fused", ok), AttentionImpl::kFused);
  for (const std::string& reason :
       {native_attention_unsupported(gpu, 0.0, 64), native_attention_unsupported(cpu, 0.1, 64),
        native_attention_unsupported(cpu, 0.0, 40)}) {
    ASSERT_FALSE(reason.empty());
    EXPECT_NE(parse_attention("auto", reason), AttentionImpl::kNative) << reason;
    try {
      parse_attention("native", reason);
      ADD_FAILURE() << "native taken although " << reason;
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  EXPECT_NE(native_attention_unsupported(gpu, 0.0, 64).find("cuda"), std::string::npos);
  EXPECT_NE(native_attention_unsupported(cpu, 0.1, 64).find("attention_dropout"),
            std::string::npos);
  EXPECT_NE(native_attention_unsupported(cpu, 0.0, 40).find("40"), std::string::npos);
  EXPECT_THROW(parse_attention("flash", ok), core::Error);
}

TEST(GptModel, NativeAttentionStepEqualsThePlainOne) {
  for (auto pe : {PositionEmbedding::kLearned, PositionEmbedding::kRope})
    expect_native_attention_step_equals_plain(pe);
}

TEST(GptModel, CrossEntropyAgreesWithTorch) {
  torch::manual_seed(4);
  const at::Tensor logits = at::randn({40, 96}).mul_(3).requires_grad_(true);
  const at::Tensor labels = at::randint(96, {40}, at::kLong);
  const at::Tensor mine = vocab_parallel_cross_entropy(logits, labels, nullptr);
  const at::Tensor g = at::rand({40});
  (mine * g).sum().backward();
  const at::Tensor grad_mine = logits.grad().clone();
  logits.mutable_grad() = at::Tensor();
  const at::Tensor ref = at::cross_entropy_loss(logits, labels, {}, at::Reduction::None);
  (ref * g).sum().backward();
  EXPECT_TRUE(tensors_close(mine, ref, 1e-6, "per-token loss"));
  EXPECT_TRUE(tensors_close(grad_mine, logits.grad(), 1e-6, "logit gradient"));
}

// RoPE rotates pairs (i, i + d/2) by angle p / base^(2i/d): norms are kept and the dot product
// of a rotated query at p and key at p' depends only on p - p'.
TEST(GptModel, RotaryEmbeddingIsARelativeRotation) {
  torch::manual_seed(5);
  const at::Tensor q = at::randn({1, 1, 1, 8}).expand({1, 1, 12, 8}).contiguous();
  const at::Tensor k = at::randn({1, 1, 1, 8}).expand({1, 1, 12, 8}).contiguous();
  const at::Tensor rq = apply_rotary(q, 10000.0), rk = apply_rotary(k, 10000.0);
  EXPECT_TRUE(tensors_close(rq.norm(2, -1), q.norm(2, -1), 1e-6, "norms"));
  const auto dot = [&](int64_t p, int64_t pk) {
    return (rq[0][0][p] * rk[0][0][pk]).sum().item<double>();
  };
  EXPECT_NEAR(dot(5, 2), dot(9, 6), 1e-5);
  EXPECT_NEAR(dot(3, 3), dot(11, 11), 1e-5);
  EXPECT_GT(std::abs(dot(5, 2) - dot(5, 4)), 1e-4) << "the offset matters";
  // Position 0 is not rotated; position 1 of pair 0 is rotated by 1 radian.
  EXPECT_TRUE(tensors_close(rq.select(2, 0), q.select(2, 0), 1e-7, "position 0"));
  const double x0 = q[0][0][1][0].item<double>(), x4 = q[0][0][1][4].item<double>();
  EXPECT_NEAR(rq[0][0][1][0].item<double>(), x0 * std::cos(1.0) - x4 * std::sin(1.0), 1e-6);
}

// The mean loss of a model with options `o` built from `seed` on `tokens` (B, 17), and every
// parameter's gradient after its backward.
struct LossAndGrads {
  double loss = 0;
  std::vector<at::Tensor> grads;
};
LossAndGrads loss_and_grads(const GptOptions& o, const at::Tensor& tokens, uint64_t seed) {
  torch::manual_seed(seed);
  Gpt gpt(o);
  const at::Tensor loss =
      gpt->token_losses(tokens.narrow(1, 0, 16), tokens.narrow(1, 1, 16)).mean();
  loss.backward();
  LossAndGrads r{loss.item<double>(), {}};
  for (const auto& p : gpt->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

TEST(GptModel, RecomputeGivesTheSameLossAndGradients) {
  torch::manual_seed(6);
  const at::Tensor tokens = at::randint(128, {2, 17}, at::kLong);
  std::vector<LossAndGrads> runs;
  for (auto r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    GptOptions o = small_options(PositionEmbedding::kRope);
    o.recompute = r;
    runs.push_back(loss_and_grads(o, tokens, 7));
  }
  for (int v = 1; v < 3; ++v) {
    EXPECT_NEAR(runs[v].loss, runs[0].loss, 1e-6);
    for (std::size_t i = 0; i < runs[0].grads.size(); ++i)
      EXPECT_TRUE(tensors_close(runs[v].grads[i], runs[0].grads[i], 1e-5,
                                "recompute " + std::to_string(v) + " grad " + std::to_string(i)));
  }
}

// The MLP's native tanh GELU (kernels/gelu.hpp) against at::gelu: the same loss and gradients of
// every parameter (within float32 rounding), and every call counted as native.
TEST(GptModel, NativeGeluGivesLibTorchsLossAndGradients) {
  torch::manual_seed(8);
  const at::Tensor tokens = at::randint(128, {2, 17}, at::kLong);
  std::vector<LossAndGrads> runs;
  std::shared_ptr<kernels::KernelUse> use;
  for (const bool native : {false, true}) {
    GptOptions o = small_options();
    o.native_gelu = native;
    o.kernel_use = std::make_shared<kernels::KernelUse>();
    o.kernel_use->chose("gemm", {"libtorch"});
    o.kernel_use->chose("gelu", {native ? "native" : "libtorch"});
    runs.push_back(loss_and_grads(o, tokens, 9));
    use = o.kernel_use;
  }
  EXPECT_NEAR(runs[1].loss, runs[0].loss, 1e-6);
  for (std::size_t i = 0; i < runs[0].grads.size(); ++i)
    EXPECT_TRUE(
        tensors_close(runs[1].grads[i], runs[0].grads[i], 1e-5, "grad " + std::to_string(i)));
  // One GELU per layer (2) in the one forward pass, all native (and 4 linear layers per layer
  // plus the output layer: 9 products); no fallback.
  EXPECT_EQ(use->summary(),
            (std::vector<std::string>{"gemm=libtorch x9", "gelu=native x2", "loss=libtorch x1"}));
  EXPECT_TRUE(use->fallbacks().empty());
}

// The output layer and its cross-entropy as one node (kernels::linear_cross_entropy) against the
// linear and vocab_parallel_cross_entropy: the same loss and gradients of every parameter (the tied
// embedding's included, through tied_output_weight) within float32 rounding, for each products'
// kernel, over two accumulated backward passes with unequal weights per token (a masked loss's);
// under bf16 autocast it hands over to the LibTorch path, logged as a fallback with the reason.
TEST(GptModel, NativeLossGivesLibTorchsLossAndGradients) {
  torch::manual_seed(12);
  const at::Tensor tokens = at::randint(128, {2, 17}, at::kLong);
  const at::Tensor weights = at::rand({2, 16});
  for (const auto gemm : {kernels::GemmKernel::LibTorch, kernels::GemmKernel::Probe}) {
    std::vector<std::pair<double, std::vector<at::Tensor>>> runs;
    for (const bool native : {false, true}) {
      GptOptions o = small_options(PositionEmbedding::kRope);
      o.gemm = gemm;
      o.native_loss = native;
      o.kernel_use = std::make_shared<kernels::KernelUse>();
      o.kernel_use->chose("loss", {native ? "native" : "libtorch"});
      torch::manual_seed(13);
      Gpt gpt(o);
      double loss_sum = 0;
      for (int pass = 0; pass < 2; ++pass) {
        const at::Tensor batch = tokens.roll(pass, 1);
        const at::Tensor loss =
            (gpt->token_losses(batch.narrow(1, 0, 16), batch.narrow(1, 1, 16)) * weights).sum();
        loss.backward();
        loss_sum += loss.item<double>();
      }
      std::vector<at::Tensor> g;
      for (const auto& p : gpt->parameters()) g.push_back(p.grad().clone());
      runs.emplace_back(loss_sum, g);
      const std::string loss_line = std::string("loss=") + (native ? "native" : "libtorch") + " x2";
      const auto summary = o.kernel_use->summary();
      EXPECT_NE(std::find(summary.begin(), summary.end(), loss_line), summary.end())
          << fmt::format("{}", fmt::join(summary, "; "));
      EXPECT_TRUE(o.kernel_use->fallbacks().empty());
    }
    const std::string what = kernels::to_string(gemm);
    EXPECT_NEAR(runs[1].first, runs[0].first, 1e-5 * std::abs(runs[0].first)) << what;
    for (std::size_t i = 0; i < runs[0].second.size(); ++i)
      EXPECT_TRUE(tensors_close(runs[1].second[i], runs[0].second[i], 1e-5,
                                what + " grad " + std::to_string(i)));
  }
  GptOptions o = small_options();
  o.native_loss = true;
  o.kernel_use = std::make_shared<kernels::KernelUse>();
  o.kernel_use->chose("loss", {"native"});
  Gpt gpt(o);
  nn::AutocastState amp = nn::AutocastState::current().disabled();
  amp.cpu_enabled = true;
  amp.cpu_dtype = at::kBFloat16;
  {
    // (With bf16 products the node takes bf16: the test below.)
    const ForcedBf16Products forced(0);
    const nn::AutocastGuard guard(amp);
    gpt->token_losses(tokens.narrow(1, 0, 16), tokens.narrow(1, 1, 16)).mean().backward();
  }
  ASSERT_EQ(o.kernel_use->fallbacks().size(), 1u);
  EXPECT_NE(o.kernel_use->fallbacks()[0].find("loss: libtorch instead of native (under CPU "
                                              "autocast on a CPU without bf16 products)"),
            std::string::npos)
      << o.kernel_use->fallbacks()[0];
}

// A bf16 step on our bf16 nodes against LibTorch's bf16 step (at::linear and its loss under
// autocast, the reference), the CPU's answer forced both ways so that every CPU runs both paths:
// - without bf16 products, the linear layers' bf16 operands multiplied in float32
//   (kernels::bf16_linear), each product counted as "<kernel>_fp32" and logged with its reason;
// - with them, the linear layers and the output layer's loss each one node of bf16 products
//   (oneDNN's matmul where it runs here, at::mm of the bf16 tensors elsewhere), counted by kernel.
// All round the same operands and outputs to bf16 and differ in the order of their float32 sums,
// and the nodes with bf16 products in the roundings they skip (float32 weight and input gradients
// and logits, where autocast rounds them to bf16 first), so the loss agrees within a few bf16
// steps (2^-8 relative) and each gradient within 6 % of its largest element (one bf16 step of
// difference in an activation carries through the layers: 1.4-2.8 % measured on a Zen 3; a
// missing or misrouted gradient is off by its whole size).
TEST(GptModel, Bf16StepOnOurNodesGivesLibTorchsBf16Step) {
  torch::manual_seed(14);
  const at::Tensor tokens = at::randint(128, {2, 17}, at::kLong);
  nn::AutocastState amp = nn::AutocastState::current().disabled();
  amp.cpu_enabled = true;
  amp.cpu_dtype = at::kBFloat16;
  struct Run {
    int has_bf16_products;
    kernels::GemmKernel gemm;
  };
  std::vector<LossAndGrads> runs;
  std::vector<std::shared_ptr<kernels::KernelUse>> uses;
  for (const Run run : {Run{1, kernels::GemmKernel::LibTorch}, Run{0, kernels::GemmKernel::Probe},
                        Run{1, kernels::GemmKernel::Probe}}) {
    const ForcedBf16Products forced(run.has_bf16_products);
    GptOptions o = small_options(PositionEmbedding::kRope, AttentionImpl::kNative);
    o.gemm = run.gemm;
    o.native_loss = run.gemm != kernels::GemmKernel::LibTorch;
    o.kernel_use = std::make_shared<kernels::KernelUse>();
    o.kernel_use->chose("gemm", {"onednn", "libtorch", "native"});
    o.kernel_use->chose("loss", {o.native_loss ? "native" : "libtorch"});
    const nn::AutocastGuard guard(amp);
    runs.push_back(loss_and_grads(o, tokens, 15));
    uses.push_back(o.kernel_use);
  }
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const std::string what = r == 1 ? "float32 products" : "bf16 products";
    EXPECT_NEAR(runs[r].loss, runs[0].loss, 4.0 / 256 * runs[0].loss) << what;
    for (std::size_t i = 0; i < runs[0].grads.size(); ++i) {
      EXPECT_EQ(runs[r].grads[i].scalar_type(), at::kFloat);
      EXPECT_TRUE(tensors_close(runs[r].grads[i], runs[0].grads[i], 0.06,
                                what + " grad " + std::to_string(i)));
    }
  }
  // Without bf16 products: 4 linear layers in each of 2 layers, and the output layer (its loss
  // stays LibTorch's there, logged); with them: the 8 linear layers, and the loss node.
  int64_t products = 0;
  for (const auto& c : uses[1]->counts()) {
    if (c.op != "gemm") continue;
    EXPECT_NE(c.kernel.find("_fp32"), std::string::npos) << c.kernel;
    products += c.calls;
  }
  EXPECT_EQ(products, 9);
  for (const std::string& line : uses[1]->fallbacks())
    if (line.rfind("gemm:", 0) == 0)
      EXPECT_NE(line.find("no bf16 matrix products"), std::string::npos) << line;
  const std::string bf16_kernel = kernels::bf16_gemm_available() ? "onednn" : "libtorch";
  const auto summary = uses[2]->summary();
  for (const std::string& line : {"gemm=" + bf16_kernel + " x8", std::string("loss=native x1")})
    EXPECT_NE(std::find(summary.begin(), summary.end(), line), summary.end())
        << line << " in " << fmt::format("{}", fmt::join(summary, "; "));
  EXPECT_TRUE(uses[2]->fallbacks().empty());
}

// Whether the backward graph from `root` reaches a node whose name contains `name`.
bool graph_has(const std::shared_ptr<torch::autograd::Node>& root, const std::string& name) {
  std::vector<torch::autograd::Node*> todo{root.get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (n->name().find(name) != std::string::npos) return true;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return false;
}

// The tied embedding's gradient summed into the output layer's (tied_embedding) against
// autograd's sum: the same loss and every gradient the same, the tied weight's to the bit (the same
// sums in the same order), over two accumulated backward passes with repeated tokens, and a hook
// on the weight (a data-parallel reducer's) sees the whole gradient.
TEST(GptModel, TiedGradientIsAutogradsSum) {
  torch::manual_seed(10);
  at::Tensor tokens = at::randint(128, {2, 17}, at::kLong);
  tokens.narrow(1, 8, 4).fill_(5);  // a token repeated within and across sequences
  std::vector<std::vector<at::Tensor>> grads;
  for (const bool tied : {false, true}) {
    GptOptions o = small_options();
    o.tied_gradient = tied;
    torch::manual_seed(11);
    Gpt gpt(o);
    at::Tensor seen;
    gpt->word_embeddings.register_hook(
        [&seen](const at::Tensor& g) { seen = seen.defined() ? seen + g : g.clone(); });
    for (int pass = 0; pass < 2; ++pass) {
      const at::Tensor batch = tokens.roll(pass, 1);
      const at::Tensor loss =
          gpt->token_losses(batch.narrow(1, 0, 16), batch.narrow(1, 1, 16)).mean();
      EXPECT_EQ(graph_has(loss.grad_fn(), "TiedEmbedding"), tied);
      loss.backward();
    }
    std::vector<at::Tensor> g;
    for (const auto& p : gpt->parameters()) g.push_back(p.grad().clone());
    grads.push_back(g);
    EXPECT_TRUE(at::equal(seen, gpt->word_embeddings.grad())) << "tied " << tied;
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_TRUE(at::equal(grads[1][0], grads[0][0])) << "word_embeddings";
  for (std::size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(tensors_close(grads[1][i], grads[0][i], 1e-6, "grad " + std::to_string(i)));
}

// Four fixed sequences repeated: the model memorises them (loss far below ln V).
class RepeatedCorpus : public data::ExampleSource {
 public:
  std::size_t size() const override { return 4; }
  data::Example get(std::size_t index, uint64_t) const override {
    at::Tensor t = at::arange(17, at::kLong).mul_(static_cast<int64_t>(index) + 3).remainder_(64);
    return {{t}, std::to_string(index)};
  }
};

TEST(GptTraining, LossFallsOnATinyRepeatedCorpus) {
  GptOptions o = small_options(PositionEmbedding::kRope);
  o.padded_vocab_size = 64;
  torch::manual_seed(8);
  const RepeatedCorpus corpus;
  GptTask task(Gpt(o), corpus, corpus, c10::Device(c10::kCPU), {});
  train::LoopOptions lo;
  lo.local_batch_size = 4;
  lo.loader_workers = 0;
  lo.train_batches_per_epoch = 10;
  lo.max_steps = 60;
  AdamOptions adam;
  adam.lr = 3e-3;
  adam.weight_decay = 0.0;
  lo.make_optimizer = megatron_adam(adam);
  lo.grad_clip_norm = 1.0;
  lo.clip_gradients = [&task](double max_norm, torch::optim::Optimizer& opt) {
    task.clip_gradients(max_norm, &opt);
  };
  const dist::ProcessGrid grid(1, 0, {1, 1, 1}, {2, 3, 4});
  train::TrainingLoop loop(task, lo, c10::Device(c10::kCPU), GptEnvironment::runtime()->world(),
                           grid);
  std::vector<double> losses;
  loop.run([&](const train::LoopEpoch& e) { losses.push_back(e.metrics.values[0].second); });
  ASSERT_EQ(losses.size(), 6u);
  EXPECT_GT(losses.front(), 2.5) << "starts near ln 64 = 4.16";
  EXPECT_LT(losses.back(), 0.5) << "the first interval's loss " << losses.front();
  EXPECT_GT(task.last_grad_norm(), 0.0);
}

// GptTask::clip_gradients against torch's clip_grad_norm_ arithmetic written out in float64 on
// copies of the same gradients (the global 2-norm; coefficient max_norm / (norm + 1e-6) clamped
// to 1): the same norm, the same scaled gradients when the norm exceeds max_norm, and the
// gradients bit for bit as they were when it does not (left untouched on a CPU).
TEST(GptTraining, ClippingIsTorchsClipGradNorm) {
  torch::manual_seed(5);
  const RepeatedCorpus corpus;
  GptTask task(Gpt(small_options()), corpus, corpus, c10::Device(c10::kCPU), {});
  const std::vector<at::Tensor> params = task.model()->parameters();
  double squares = 0;
  for (const at::Tensor& p : params) {
    p.mutable_grad() = at::randn_like(p);
    squares += p.grad().to(at::kDouble).square().sum().item<double>();
  }
  const double norm = std::sqrt(squares);
  for (const double max_norm : {2 * norm, norm / 4}) {
    SCOPED_TRACE("max_norm " + std::to_string(max_norm));
    std::vector<at::Tensor> before;
    for (const at::Tensor& p : params) before.push_back(p.grad().clone());
    EXPECT_NEAR(task.clip_gradients(max_norm).item<double>(), norm, 1e-5 * norm);
    const double coef = std::min(1.0, max_norm / (norm + 1e-6));
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (coef == 1.0)
        EXPECT_TRUE(at::equal(params[i].grad(), before[i])) << "parameter " << i;
      else
        EXPECT_TRUE(tensors_close(params[i].grad(), before[i].to(at::kDouble) * coef, 1e-6,
                                  "parameter " + std::to_string(i)));
    }
  }
  // Clipped once: the norm is now max_norm (max_norm 0 measures without clipping).
  EXPECT_NEAR(task.clip_gradients(0).item<double>(), norm / 4, 1e-4 * norm);
}

// Clipping with the fused AdamW about to step: the factor goes to the optimizer, the gradients
// stay, and the step equals the step after clipping the gradients themselves, to the bit.
TEST(GptTraining, ClippingHandsTheFactorToTheFusedAdamW) {
  const RepeatedCorpus corpus;
  std::vector<std::vector<at::Tensor>> stepped;
  for (const bool fold : {false, true}) {
    torch::manual_seed(12);
    GptTask task(Gpt(small_options()), corpus, corpus, c10::Device(c10::kCPU), {});
    const std::vector<at::Tensor> params = task.model()->parameters();
    for (const at::Tensor& p : params) p.mutable_grad() = at::randn_like(p) * 10.0;
    std::vector<at::Tensor> before;
    for (const at::Tensor& p : params) before.push_back(p.grad().clone());
    kernels::FusedAdamW adamw(params, torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
    task.clip_gradients(1.0, fold ? &adamw : nullptr);
    EXPECT_EQ(adamw.next_gradient_scale() < 1.f, fold);
    EXPECT_EQ(at::equal(params[0].grad(), before[0]), fold) << "gradients left as they were";
    adamw.step();
    EXPECT_TRUE(adamw.last_step_fused());
    std::vector<at::Tensor> after;
    for (const at::Tensor& p : params) after.push_back(p.detach().clone());
    stepped.push_back(after);
  }
  for (std::size_t i = 0; i < stepped[0].size(); ++i)
    EXPECT_TRUE(at::equal(stepped[1][i], stepped[0][i])) << "parameter " << i;
}

// loss_kernel resolved for a run with one tensor-parallel rank in fp32 (the other layouts below).
bool native_loss_one_rank_fp32(const std::string& loss_kernel, const c10::Device& device) {
  return native_loss(loss_kernel, device, 1, "fp32");
}

// optimizer_kernel and gelu_kernel resolved per device: auto is the CPU kernel (the one-pass
// AdamW, the native GELU) on a CPU only; naming it on a GPU is refused naming the key, the kernel
// and the device (a Device value needs no GPU).
TEST(GptTraining, TheCpuKernelKeysAreResolvedForTheRunsDevice) {
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 1);
  struct Key {
    const char* name;
    const char* kernel;
    bool (*resolve)(const std::string&, const c10::Device&);
  };
  for (const Key& k : {Key{"optimizer_kernel", "fused", &fused_optimizer},
                       Key{"gelu_kernel", "native", &native_gelu},
                       Key{"loss_kernel", "native", &native_loss_one_rank_fp32}}) {
    EXPECT_TRUE(k.resolve("auto", cpu)) << k.name;
    EXPECT_FALSE(k.resolve("auto", gpu)) << k.name;
    EXPECT_TRUE(k.resolve(k.kernel, cpu)) << k.name;
    EXPECT_FALSE(k.resolve("libtorch", cpu)) << k.name;
    EXPECT_FALSE(k.resolve("libtorch", gpu)) << k.name;
    try {
      k.resolve(k.kernel, gpu);
      ADD_FAILURE() << k.name << ": " << k.kernel << " on a GPU was accepted";
    } catch (const core::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(k.name) + ": " + k.kernel + " runs on the CPU"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("cuda:1"), std::string::npos) << what;
    }
  }
  // loss_kernel's auto is native only where the kernel takes every call: one tensor-parallel rank
  // in fp32, or in bf16 on a CPU with bf16 products; native stays native (its calls fall back at
  // run time, logged).
  EXPECT_TRUE(native_loss("auto", cpu, 1, "fp32"));
  EXPECT_FALSE(native_loss("auto", cpu, 2, "fp32"));
  {
    const ForcedBf16Products forced(0);
    EXPECT_FALSE(native_loss("auto", cpu, 1, "bf16"));
    forced.set(1);
    EXPECT_TRUE(native_loss("auto", cpu, 1, "bf16"));
    EXPECT_FALSE(native_loss("auto", cpu, 2, "bf16"));
  }
  EXPECT_TRUE(native_loss("native", cpu, 2, "bf16"));
  EXPECT_FALSE(native_loss("libtorch", cpu, 1, "fp32"));
  // What each builds: the one-pass optimizer or LibTorch's.
  const std::vector<at::Tensor> params{at::zeros({4, 4}).requires_grad_(true)};
  AdamOptions o;
  o.fused = true;
  EXPECT_NE(dynamic_cast<kernels::FusedAdamW*>(megatron_adam(o)(params).get()), nullptr);
  o.fused = false;
  EXPECT_EQ(dynamic_cast<kernels::FusedAdamW*>(megatron_adam(o)(params).get()), nullptr);
}

}  // namespace
}  // namespace scaffold::llm
