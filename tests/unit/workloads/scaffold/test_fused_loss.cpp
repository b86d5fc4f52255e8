// The one-pass loss sums (workloads/scaffold/fused_loss.hpp) against the loss of LibTorch's
// operators (segmentation_loss with fused = false) evaluated in float64, which test_loss.cpp checks
// by hand and by finite differences: loss, CE, soft Dice and the logits' gradient within 2e-6
// (relative to the largest magnitude), on volumes that fill several chunks and leave a partial one.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "workloads/scaffold/fused_loss.hpp"
#include "workloads/scaffold/loss.hpp"

namespace scaffold::train {
namespace {

// max |got - want| <= tol · max(1, max |want|)
void expect_close(const at::Tensor& got, const at::Tensor& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const at::Tensor g = got.detach().to(at::kDouble), w = want.detach().to(at::kDouble);
  const double scale = std::max(1.0, w.abs().max().item<double>());
  const double err = (g - w).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max |err| " << err << " at scale " << scale;
}

struct Result {
  LossTerms terms;
  at::Tensor grad;
};

Result run(const at::Tensor& logits, const at::Tensor& target, const at::Tensor& weights,
           bool fused) {
  const at::Tensor x = logits.detach().clone().requires_grad_(true);
  Result r{segmentation_loss(x, target, weights, {}, fused), {}};
  r.terms.loss.backward();
  r.grad = x.grad();
  return r;
}

// (B, K, D, H, W, logit scale)
class FusedLoss : public ::testing::TestWithParam<
                      std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, double>> {};

TEST_P(FusedLoss, MatchesLibTorchsOperatorsInFloat64) {
  const auto [b, k, d, h, w, scale] = GetParam();
  at::manual_seed(11);
  const at::Tensor logits = at::randn({b, k, d, h, w}) * scale;
  const at::Tensor target = at::randint(0, k, {b, d, h, w});
  const at::Tensor weights = at::rand({k}) + 0.5;
  ASSERT_TRUE(softmax_loss_sums_supported(logits));
  const Result ours = run(logits, target, weights, /*fused=*/true);
  const Result ref = run(logits.to(at::kDouble), target, weights, /*fused=*/false);
  EXPECT_EQ(ours.terms.loss.scalar_type(), at::kFloat);
  expect_close(ours.terms.loss, ref.terms.loss, 2e-6, "loss");
  expect_close(ours.terms.ce, ref.terms.ce, 2e-6, "ce");
  expect_close(ours.terms.soft_dice, ref.terms.soft_dice, 2e-6, "soft Dice");
  expect_close(ours.grad, ref.grad, 2e-6, "d loss / d logits");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedLoss,
    ::testing::Values(std::make_tuple(1, 6, 16, 16, 16, 1.0),  // 4 whole chunks
                      std::make_tuple(2, 3, 5, 6, 7, 2.0),  // one partial chunk, not whole vectors
                      std::make_tuple(2, 2, 9, 16, 9,
                                      1.0),  // 1296 voxels: a whole and a partial chunk
                      std::make_tuple(1, 4, 8, 8, 8, 40.0)));  // saturated softmax: exp underflows

TEST(FusedLossSums, DoNotDependOnTheThreadCount) {
  at::manual_seed(12);
  const at::Tensor logits = at::randn({2, 5, 16, 16, 12});
  const at::Tensor target = at::randint(0, 5, {2, 16, 16, 12});
  const at::Tensor weights = at::rand({5}) + 0.5;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Result one = run(logits, target, weights, true);
  at::set_num_threads(2);
  const Result two = run(logits, target, weights, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one.terms.loss, two.terms.loss));
  EXPECT_TRUE(at::equal(one.grad, two.grad));
}

TEST(FusedLossSums, NonFiniteLogitsGiveANanLossAsTheReferenceDoes) {
  at::Tensor logits = at::randn({1, 3, 4, 4, 4});
  logits[0][1][2][2][2] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor target = at::randint(0, 3, {1, 4, 4, 4});
  const at::Tensor weights = at::ones({3});
  EXPECT_TRUE(std::isnan(segmentation_loss(logits, target, weights, {}, false).loss.item<float>()));
  EXPECT_TRUE(std::isnan(segmentation_loss(logits, target, weights).loss.item<float>()));
  logits[0][1][2][2][2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(segmentation_loss(logits, target, weights).loss.item<float>()));
}

TEST(FusedLossSums, ALabelOutsideTheClassesIsAnError) {
  const at::Tensor logits = at::randn({1, 3, 4, 4, 4});
  at::Tensor target = at::randint(0, 3, {1, 4, 4, 4});
  target[0][3][1][2] = 3;
  try {
    segmentation_loss(logits, target, at::ones({3}));
    FAIL() << "no error for label 3 of 3 classes";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside [0, 3)"), std::string::npos) << e.what();
  }
  target[0][3][1][2] = -1;
  EXPECT_THROW(segmentation_loss(logits, target, at::ones({3})), core::Error);
}

TEST(FusedLossSums, TakeOnlyFloat32CpuLogits) {
  EXPECT_FALSE(softmax_loss_sums_supported(at::randn({1, 3, 2, 2, 2}, at::kDouble)));
  EXPECT_FALSE(softmax_loss_sums_supported(at::randn({3, 2, 2, 2})));
  EXPECT_THROW(softmax_loss_sums(at::randn({1, 3, 2, 2, 2}), at::zeros({1, 2, 2, 2}, at::kLong),
                                 at::ones({2})),
               core::Error);
}

}  // namespace
}  // namespace scaffold::train
