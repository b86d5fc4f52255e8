// Loss, soft and hard Dice, and CE weights against hand-computed cases (docs/benchmark.md), a
// finite-difference gradient check, bf16 inputs, autocast isolation, and the SpatialSum contract:
// two D-halves combined through spatial_sum must reproduce the whole volume's values and gradients.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "workloads/scaffold/loss.hpp"

namespace scaffold::train {
namespace {

constexpr double kEps = 1e-6;  // the Dice smoothing term (docs/benchmark.md)

// Fails with the max-abs error, the tolerance and the first offending element.
void expect_all_close(const at::Tensor& got, const at::Tensor& want, double tol,
                      const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const at::Tensor g = got.detach().to(at::kDouble).reshape({-1}).contiguous();
  const at::Tensor w = want.detach().to(at::kDouble).reshape({-1}).contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  double max_err = 0.0;
  int64_t first_bad = -1;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double err = std::abs(gp[i] - wp[i]);
    if (!(err <= tol) && first_bad < 0) first_bad = i;
    if (!(err <= max_err)) max_err = err;
  }
  if (first_bad >= 0) {
    ADD_FAILURE() << what << ": max |err| " << max_err << " > tolerance " << tol
                  << "; first offending element " << first_bad << ": got " << gp[first_bad]
                  << ", want " << wp[first_bad];
  }
}

double scalar(const at::Tensor& t) {
  return t.detach().to(at::kDouble).item<double>();
}

at::Tensor floats(const std::vector<float>& values, at::IntArrayRef shape) {
  return at::tensor(values, at::kFloat).view(shape);
}
at::Tensor labels(const std::vector<int64_t>& values, at::IntArrayRef shape) {
  return at::tensor(values, at::kLong).view(shape);
}

// Logits whose argmax is `predicted` (B, D, H, W): 5 on the predicted class, 0 elsewhere.
at::Tensor logits_predicting(const at::Tensor& predicted, int64_t n_classes) {
  const auto b = predicted.size(0);
  at::Tensor logits =
      at::zeros({b, n_classes, predicted.size(1), predicted.size(2), predicted.size(3)});
  logits.scatter_(1, predicted.unsqueeze(1), 5.0);
  return logits;
}

double dice(double intersection, double set_sum) {
  if (set_sum == 0.0) set_sum = intersection;
  return (intersection + kEps) / (set_sum + kEps);
}

TEST(Loss, WeightedCrossEntropyAndSoftDiceByHand) {
  // Two voxels, two classes. Voxel 0: logits (0, ln 3) so p = (1/4, 3/4), label 1.
  // Voxel 1: logits (0, 0) so p = (1/2, 1/2), label 0. Weights w = (1, 3).
  const at::Tensor logits = floats({0.0f, 0.0f, std::log(3.0f), 0.0f}, {1, 2, 1, 1, 2});
  const at::Tensor target = labels({1, 0}, {1, 1, 1, 2});
  const at::Tensor weights = floats({1.0f, 3.0f}, {2});
  const LossTerms terms = segmentation_loss(logits, target, weights);

  const double ce = (3.0 * std::log(4.0 / 3.0) + 1.0 * std::log(2.0)) / (3.0 + 1.0);
  // Class 1: I = 2·(3/4), S = (3/4 + 1/2) + 1.
  const double dice1 = dice(2.0 * 0.75, 0.75 + 0.5 + 1.0);
  EXPECT_NEAR(scalar(terms.ce), ce, 1e-6);
  ASSERT_EQ(terms.soft_dice.sizes(), at::IntArrayRef({1}));
  EXPECT_NEAR(scalar(terms.soft_dice[0]), dice1, 1e-6);
  EXPECT_NEAR(scalar(terms.loss), ce + 1.0 - dice1, 1e-6);
  EXPECT_EQ(terms.loss.dim(), 0);
  EXPECT_EQ(terms.loss.scalar_type(), at::kFloat);
  EXPECT_FALSE(terms.ce.requires_grad());
}

TEST(Loss, SoftDicePerSampleExcludesBackground) {
  // Three classes, two voxels, logits = log(probabilities) so the softmax returns them.
  // Sample 0: p(v0) = (0.2, 0.5, 0.3) label 1; p(v1) = (0.6, 0.1, 0.3) label 2.
  // Sample 1: p(v0) = (0.1, 0.1, 0.8) label 2; p(v1) = (0.7, 0.2, 0.1) label 0.
  const std::vector<std::vector<float>> p{
      {0.2f, 0.5f, 0.3f}, {0.6f, 0.1f, 0.3f}, {0.1f, 0.1f, 0.8f}, {0.7f, 0.2f, 0.1f}};
  std::vector<float> values(12);
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 3; ++c)
      for (int v = 0; v < 2; ++v) values[b * 6 + c * 2 + v] = std::log(p[b * 2 + v][c]);
  const at::Tensor logits = floats(values, {2, 3, 1, 1, 2});
  const at::Tensor target = labels({1, 2, 2, 0}, {2, 1, 1, 2});
  const LossTerms terms = segmentation_loss(logits, target, floats({1, 1, 1}, {3}));

  // Sample 0: class 1 I = 1.0, S = 0.6 + 1; class 2 I = 0.6, S = 0.6 + 1. Background (I = 0,
  // S = 0.8, Dice ~0) would pull the mean down to ~1/3 if it were included.
  const double s0 = (dice(1.0, 1.6) + dice(0.6, 1.6)) / 2.0;
  // Sample 1: class 1 absent from the target: I = 0, S = 0.3; class 2: I = 1.6, S = 0.9 + 1.
  const double s1 = (dice(0.0, 0.3) + dice(1.6, 1.9)) / 2.0;
  expect_all_close(terms.soft_dice, at::tensor({s0, s1}, at::kDouble), 1e-6, "soft Dice (B)");
  const double weighted_ce = -(std::log(0.5) + std::log(0.3) + std::log(0.8) + std::log(0.7)) / 4.0;
  EXPECT_NEAR(scalar(terms.ce), weighted_ce, 1e-6);
  EXPECT_NEAR(scalar(terms.loss), weighted_ce + 1.0 - (s0 + s1) / 2.0, 1e-6);
}

TEST(Loss, PerfectPredictionHasZeroLoss) {
  at::manual_seed(1);
  at::Tensor target = at::randint(0, 3, {2, 4, 4, 4}, at::kLong);
  target.select(1, 0).select(1, 0).select(1, 0).fill_(1);  // every class present in each sample
  target.select(1, 0).select(1, 0).select(1, 1).fill_(2);
  const at::Tensor logits = logits_predicting(target, 3) * 8.0;  // margin 40: p_y = 1 - 4e-18
  const LossTerms terms = segmentation_loss(logits, target, floats({1.0f, 50.0f, 50.0f}, {3}));
  EXPECT_NEAR(scalar(terms.ce), 0.0, 1e-6);
  expect_all_close(terms.soft_dice, at::ones({2}, at::kDouble), 1e-6,
                   "soft Dice of a perfect prediction");
  EXPECT_NEAR(scalar(terms.loss), 0.0, 1e-6);
}

TEST(Loss, EmptyClassWithNoProbabilityScoresOne) {
  // Class 2 is in neither the target nor (to float precision) the prediction: S = Σp ≈ 0.
  const at::Tensor target = labels({0, 1, 1, 0}, {1, 1, 2, 2});
  at::Tensor logits = logits_predicting(target, 3) * 8.0;
  logits.select(1, 2).fill_(-100.0);
  const LossTerms terms = segmentation_loss(logits, target, floats({1, 1, 1}, {3}));
  EXPECT_NEAR(scalar(terms.soft_dice[0]), 1.0, 1e-6);
}

TEST(Loss, Bf16LogitsGiveTheFloat32LossOfTheSameValues) {
  at::manual_seed(2);
  const at::Tensor base = at::randn({2, 3, 4, 3, 2}).mul(3.0);
  const at::Tensor target = at::randint(0, 3, {2, 4, 3, 2}, at::kLong);
  const at::Tensor weights = floats({1.01f, 90.0f, 90.0f}, {3});

  const at::Tensor low = base.to(at::kBFloat16).requires_grad_(true);  // (B, K, D, H, W) bf16
  const at::Tensor high = low.detach().to(at::kFloat).requires_grad_(true);
  const LossTerms from_low = segmentation_loss(low, target, weights);
  const LossTerms from_high = segmentation_loss(high, target, weights);
  EXPECT_EQ(from_low.loss.scalar_type(), at::kFloat);
  // Tolerance 0: the first thing done is the cast, so both runs compute on identical floats.
  EXPECT_EQ(scalar(from_low.loss), scalar(from_high.loss));
  EXPECT_EQ(scalar(from_low.ce), scalar(from_high.ce));
  expect_all_close(from_low.soft_dice, from_high.soft_dice, 0.0, "soft Dice bf16 vs fp32");

  from_low.loss.backward();
  from_high.loss.backward();
  ASSERT_EQ(low.grad().scalar_type(), at::kBFloat16);
  expect_all_close(low.grad(), high.grad().to(at::kBFloat16), 0.0,
                   "d loss / d logits, bf16 vs fp32");
}

TEST(Loss, GradientMatchesFiniteDifferences) {
  at::manual_seed(3);
  const at::Tensor logits = at::randn({2, 3, 2, 2, 1}, at::kDouble);
  const at::Tensor target = labels({0, 1, 2, 1, 2, 2, 0, 0}, {2, 2, 2, 1});
  const at::Tensor weights = floats({1.0f, 2.0f, 3.0f}, {3});

  const at::Tensor x = logits.clone().requires_grad_(true);
  const LossTerms terms = segmentation_loss(x, target, weights);
  ASSERT_EQ(terms.loss.scalar_type(), at::kDouble);
  terms.loss.backward();

  const double h = 1e-5;  // central differences: truncation ~h², rounding ~1e-16/h
  at::Tensor numeric = at::zeros_like(logits);
  const at::Tensor flat = numeric.view({-1});
  for (int64_t i = 0; i < logits.numel(); ++i) {
    at::Tensor plus = logits.clone();
    at::Tensor minus = logits.clone();
    plus.view({-1})[i] += h;
    minus.view({-1})[i] -= h;
    const double up = scalar(segmentation_loss(plus, target, weights).loss);
    const double down = scalar(segmentation_loss(minus, target, weights).loss);
    flat[i] = (up - down) / (2.0 * h);
  }
  expect_all_close(x.grad(), numeric, 1e-6, "autograd vs finite differences");
}

// Autocast state of the CPU key, as at::autocast's enable/disable calls read and write it.
bool cpu_autocast_on() {
  return !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutocastCPU);
}

TEST(Loss, AutocastIsOffInsideAndRestoredAfter) {
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::AutocastCPU, false);  // autocast on
  ASSERT_TRUE(cpu_autocast_on());
  std::vector<bool> seen;
  const SpatialSum spy = [&](const at::Tensor& t) {
    seen.push_back(cpu_autocast_on());
    return t;
  };
  const at::Tensor target = labels({0, 1, 2, 1}, {1, 1, 2, 2});
  const at::Tensor logits = logits_predicting(target, 3);
  segmentation_loss(logits, target, floats({1, 1, 1}, {3}), spy);
  const bool after_loss = cpu_autocast_on();
  hard_dice_per_sample(logits, target, 3, spy);
  const bool after_dice = cpu_autocast_on();
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::AutocastCPU, true);  // back to default

  EXPECT_EQ(seen, std::vector<bool>({false, false, false}));
  EXPECT_TRUE(after_loss);
  EXPECT_TRUE(after_dice);
}

// --- SpatialSum: two "ranks" holding the two D-halves of the same samples ---------------------

// Records the local partial sums of each spatial_sum call, in order, and returns them unchanged.
struct Recorder {
  std::vector<at::Tensor> partials;
  SpatialSum fn() {
    return [this](const at::Tensor& t) {
      partials.push_back(t.detach().clone());
      return t;
    };
  }
};

// Adds the other half's partial sums for the same call: what an all-reduce over two ranks returns.
// The addend is a constant, so backward is the identity, as the contract requires.
SpatialSum add_partials_of(const std::vector<at::Tensor>& other, int* calls) {
  return [&other, calls](const at::Tensor& local) {
    EXPECT_LT(*calls, static_cast<int>(other.size())) << "more spatial_sum calls than expected";
    const at::Tensor& remote = other.at(static_cast<std::size_t>((*calls)++));
    EXPECT_EQ(local.sizes(), remote.sizes());
    return local + remote;
  };
}

TEST(SpatialSum, TwoHalvesAlongDReproduceTheWholeVolume) {
  at::manual_seed(4);
  const int64_t depth = 6, half = 3;
  const at::Tensor logits = at::randn({2, 3, depth, 3, 2}).mul(2.0);
  at::Tensor target = at::randint(0, 3, {2, depth, 3, 2}, at::kLong);
  target[1].masked_fill_(target[1].eq(2), 1);  // sample 1 has no class 2 ...
  at::Tensor sharp = logits.clone();
  sharp[1].select(0, 2).fill_(-20.0);  // ... and predicts none: empty/empty in hard Dice
  const at::Tensor weights = floats({1.05f, 20.0f, 20.0f}, {3});

  const at::Tensor whole_x = sharp.clone().requires_grad_(true);
  const LossTerms whole = segmentation_loss(whole_x, target, weights);
  whole.loss.backward();
  const at::Tensor whole_hard = hard_dice_per_sample(sharp, target, 3);
  ASSERT_EQ(sharp[1].argmax(0).eq(2).sum().item<int64_t>(), 0);  // the empty/empty case is there

  const at::Tensor logits_a = sharp.narrow(2, 0, half),
                   logits_b = sharp.narrow(2, half, depth - half);
  const at::Tensor target_a = target.narrow(1, 0, half),
                   target_b = target.narrow(1, half, depth - half);

  // Each rank's local partial sums: exactly one call for CE and one for Dice, one for hard Dice.
  Recorder rec_a, rec_b;
  const LossTerms local_a = segmentation_loss(logits_a, target_a, weights, rec_a.fn());
  segmentation_loss(logits_b, target_b, weights, rec_b.fn());
  hard_dice_per_sample(logits_a, target_a, 3, rec_a.fn());
  hard_dice_per_sample(logits_b, target_b, 3, rec_b.fn());
  ASSERT_EQ(rec_a.partials.size(), 3u);
  ASSERT_EQ(rec_b.partials.size(), 3u);
  EXPECT_EQ(rec_a.partials[0].sizes(), at::IntArrayRef({2}));        // CE numerator, denominator
  EXPECT_EQ(rec_a.partials[1].sizes(), at::IntArrayRef({2, 2, 2}));  // (I, S) x (B, K-1)
  // The test means something only if one half alone gives a different loss.
  EXPECT_GT(std::abs(scalar(local_a.loss) - scalar(whole.loss)), 1e-3);

  for (int rank = 0; rank < 2; ++rank) {
    const at::Tensor& mine = rank == 0 ? logits_a : logits_b;
    const at::Tensor& my_target = rank == 0 ? target_a : target_b;
    const std::vector<at::Tensor>& theirs = rank == 0 ? rec_b.partials : rec_a.partials;
    const std::string who = rank == 0 ? "half A" : "half B";

    const at::Tensor x = mine.clone().requires_grad_(true);
    int calls = 0;
    const LossTerms sharded =
        segmentation_loss(x, my_target, weights, add_partials_of(theirs, &calls));
    EXPECT_EQ(calls, 2) << who;
    EXPECT_NEAR(scalar(sharded.loss), scalar(whole.loss), 1e-6) << who;
    EXPECT_NEAR(scalar(sharded.ce), scalar(whole.ce), 1e-6) << who;
    expect_all_close(sharded.soft_dice, whole.soft_dice, 1e-6, who + " soft Dice");
    // Gradient of the global loss w.r.t. this half = the whole volume's gradient on this half.
    sharded.loss.backward();
    const at::Tensor whole_grad_here =
        whole_x.grad().narrow(2, rank == 0 ? 0 : half, rank == 0 ? half : depth - half);
    expect_all_close(x.grad(), whole_grad_here, 1e-6, who + " gradient");

    std::vector<at::Tensor> their_hard{theirs[2]};
    int hard_calls = 0;
    const at::Tensor hard =
        hard_dice_per_sample(mine, my_target, 3, add_partials_of(their_hard, &hard_calls));
    EXPECT_EQ(hard_calls, 1) << who;
    expect_all_close(hard, whole_hard, 1e-6, who + " hard Dice");
  }
}

// --- hard Dice -----------------------------------------------------------------------------------

TEST(HardDice, HandMadeArgmaxCases) {
  // One row of four voxels per sample, three classes.
  const at::Tensor target = labels({0, 1, 1, 2,   // sample 0
                                    0, 0, 1, 1,   // sample 1: class 2 absent in both
                                    0, 0, 1, 1,   // sample 2: class 2 predicted but absent
                                    0, 0, 0, 1},  // sample 3: background wrong everywhere
                                   {4, 1, 1, 4});
  // clang-format off
  const at::Tensor predicted = labels({0, 1, 2, 2,
                                       0, 0, 1, 1,
                                       0, 2, 1, 1,
                                       1, 1, 1, 1},
                                      {4, 1, 1, 4});
  // clang-format on
  const at::Tensor got = hard_dice_per_sample(logits_predicting(predicted, 3), target, 3);
  ASSERT_EQ(got.scalar_type(), at::kFloat);

  const double s0 = (dice(2, 1 + 2) + dice(2, 2 + 1)) / 2.0;  // 2/3 each
  const double s1 = (dice(4, 2 + 2) + dice(0, 0)) / 2.0;      // empty/empty scores 1
  const double s2 = (dice(4, 2 + 2) + dice(0, 1 + 0)) / 2.0;  // predicted-but-absent scores ~0
  const double s3 = (dice(2, 4 + 1) + dice(0, 0)) / 2.0;  // 0.7; with background (Dice ~0): 0.47
  expect_all_close(got, at::tensor({s0, s1, s2, s3}, at::kDouble), 1e-6, "hard Dice (B)");
  EXPECT_NEAR(s1, 1.0, 1e-12);
  EXPECT_NEAR(dice(0, 1), 0.0, 1e-5);

  // bf16 logits give the same argmax.
  expect_all_close(
      hard_dice_per_sample(logits_predicting(predicted, 3).to(at::kBFloat16), target, 3), got, 0.0,
      "hard Dice from bf16 logits");
}

TEST(HardDice, RejectsAClassCountThatIsNotTheChannelCount) {
  const at::Tensor target = labels({0, 1}, {1, 1, 1, 2});
  EXPECT_THROW(hard_dice_per_sample(logits_predicting(target, 3), target, 4), std::logic_error);
}

// --- CE class weights ----------------------------------------------------------------------------

TEST(CeWeights, SampleIndicesFollowNumpyLinspace) {
  // numpy.linspace(0, 167, 17).astype(int): the default 10 % of 168.
  EXPECT_EQ(ce_weight_sample_indices(168, 0.1),
            std::vector<int64_t>(
                {0, 10, 20, 31, 41, 52, 62, 73, 83, 93, 104, 114, 125, 135, 146, 156, 167}));
  EXPECT_EQ(ce_weight_sample_indices(5, 0.01), std::vector<int64_t>({0}));
  EXPECT_EQ(ce_weight_sample_indices(4, 1.0), std::vector<int64_t>({0, 1, 2, 3}));
  EXPECT_EQ(ce_weight_sample_indices(4, 5.0), std::vector<int64_t>({0, 1, 2, 3}));
  EXPECT_TRUE(ce_weight_sample_indices(0, 0.1).empty());
  // numpy truncates 25 · 10.2 = 254.99999999999997 to 254 (torch.linspace in float32 gives 255).
  const auto idx = ce_weight_sample_indices(307, 0.1);
  ASSERT_EQ(idx.size(), 31u);
  EXPECT_EQ(idx[24], 244);
  EXPECT_EQ(idx[25], 254);
  EXPECT_EQ(idx[30], 306);
  EXPECT_THROW(ce_weight_sample_indices(10, std::nan("")), core::Error);
}

TEST(CeWeights, ClassCountsAreABincount) {
  EXPECT_EQ(class_counts(labels({0, 1, 2, 2, 0, 0}, {1, 2, 3}), 3),
            std::vector<int64_t>({3, 1, 2}));
  EXPECT_EQ(class_counts(labels({0, 0}, {2}), 4), std::vector<int64_t>({2, 0, 0, 0}));
}

TEST(CeWeights, ClassCountsRejectOutOfRangeLabelsByValue) {
  for (const int64_t bad : {3, 7, -1}) {
    try {
      class_counts(labels({0, 1, bad, 2}, {4}), 3);
      ADD_FAILURE() << "label " << bad << " accepted";
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("label " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(class_counts(floats({0, 1}, {2}), 3), core::Error);
}

TEST(CeWeights, WeightsFromCounts) {
  const at::Tensor w = ce_class_weights({98, 1, 1});
  ASSERT_EQ(w.scalar_type(), at::kFloat);
  expect_all_close(w, at::tensor({100.0 / 98.0, 50.0, 50.0}, at::kDouble), 1e-6,
                   "w from [98, 1, 1]");
  EXPECT_EQ(w[0].item<float>(), static_cast<float>(100.0 / 98.0));
  expect_all_close(ce_class_weights({5, 0, 0}), at::ones({3}, at::kDouble), 0.0, "w when fg = 0");
  expect_all_close(ce_class_weights({0, 3, 4}), at::ones({3}, at::kDouble), 0.0, "w when bg = 0");
  EXPECT_THROW(ce_class_weights({1, -2}), core::Error);
}

}  // namespace
}  // namespace scaffold::train
