// operator_learning's update target (outType: update, outScaling s; workloads/fno/target.hpp)
// against values written out here: the target is (next - current) x s with current the input's
// last time step, its inverse (update / s + input, operator_learning's inference) gives back the
// next state, and the source wrapper changes only the target field. Also the per-field relative
// loss (operator_learning's VectorNormLoss) on hand-computed values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "workloads/fno/target.hpp"
#include "workloads/fno/task.hpp"

namespace scaffold::fno {
namespace {

TEST(FnoTarget, UpdateIsTheScaledDifferenceToTheLastInputStep) {
  // Two input steps of 2 channels on 3 points; the last step is channels 2 and 3.
  const at::Tensor input = at::tensor({1.0, 2.0, 3.0,      //
                                       4.0, 5.0, 6.0,      //
                                       10.0, 20.0, 30.0,   //
                                       40.0, 50.0, 60.0},  //
                                      at::kDouble)
                               .view({4, 3});
  const at::Tensor next = at::tensor({10.5, 20.25, 29.0,  //
                                      41.0, 50.0, 59.5},
                                     at::kDouble)
                              .view({2, 3});
  const at::Tensor want = at::tensor({500.0, 250.0, -1000.0,  //
                                      1000.0, 0.0, -500.0},
                                     at::kDouble)
                              .view({2, 3});
  const at::Tensor update = update_target(input, next, 2, 1000.0);
  EXPECT_TRUE(at::allclose(update, want, 0.0, 1e-9)) << update;
  EXPECT_TRUE(at::allclose(next_from_update(input, update, 2, 1000.0), next, 0.0, 1e-12));
}

TEST(FnoTarget, EveryPredictedStepIsMeasuredFromTheSameCurrentState) {
  const at::Tensor input = at::tensor({1.0, 2.0}, at::kDouble).view({1, 2});  // one step, 1 channel
  const at::Tensor next = at::tensor({1.5, 2.5, 3.0, 4.0}, at::kDouble).view({2, 2});  // two steps
  const at::Tensor want = at::tensor({1.0, 1.0, 4.0, 4.0}, at::kDouble).view({2, 2});  // x 2
  EXPECT_TRUE(at::allclose(update_target(input, next, 1, 2.0), want, 0.0, 1e-12));
}

TEST(FnoTarget, TheInverseGivesBackTheNextStateOfRandomFieldsAlongABatchAxis) {
  at::manual_seed(7);
  const at::Tensor input = at::randn({3, 4, 16, 8});  // (B, u_x u_z b p, nx, nz)
  const at::Tensor next = input + 1e-3 * at::randn({3, 4, 16, 8});
  const at::Tensor update = update_target(input, next, 4, 1000.0, /*channel_dim=*/1);
  EXPECT_TRUE(at::allclose(update, (next - input) * 1000.0, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(next_from_update(input, update, 4, 1000.0, 1), next, 1e-6, 1e-6));
}

TEST(FnoTarget, ChannelsThatAreNotWholeStepsAreRefused) {
  const at::Tensor input = at::zeros({3, 2});
  EXPECT_THROW(update_target(input, at::zeros({4, 2}), 2, 1.0), core::Error);
}

struct TwoExamples : data::ExampleSource {
  std::size_t size() const override { return 2; }
  data::Example get(std::size_t i, uint64_t) const override {
    const double v = static_cast<double>(i);
    return {{at::full({1, 4}, v, at::kDouble), at::full({1, 4}, v + 0.25, at::kDouble)},
            "ex" + std::to_string(i)};
  }
  std::string origin(std::size_t i) const override { return "file" + std::to_string(i); }
};

TEST(FnoTarget, TheSourceReplacesOnlyTheTarget) {
  const UpdateTargetSource s(std::make_unique<TwoExamples>(), 1, 1000.0);
  ASSERT_EQ(s.size(), 2u);
  const data::Example e = s.get(1, 0);
  EXPECT_EQ(e.id, "ex1");
  EXPECT_EQ(s.origin(1), "file1");
  EXPECT_TRUE(at::equal(e.fields[0], at::full({1, 4}, 1.0, at::kDouble)));
  EXPECT_TRUE(at::allclose(e.fields[1], at::full({1, 4}, 250.0, at::kDouble), 0.0, 1e-9));
}

}  // namespace
}  // namespace scaffold::fno

namespace scaffold::fno {
namespace {

// The two relative errors on numbers worked out by hand: field 0 target (3, 4) (norm 5), error
// (0, 1): 0.2; field 1 target (0, 10), error (0, 5): 0.5. Per field (operator_learning's
// VectorNormLoss): (0.2 + 0.5) / 2 = 0.35. Per example (the paper's LpLoss): sqrt(26 / 125).
TEST(FnoLoss, FieldRelativeL2AveragesEachFieldsOwnError) {
  const at::Tensor target = at::tensor({3.0, 4.0, 0.0, 10.0}, at::kDouble).view({1, 2, 2});
  const at::Tensor pred = at::tensor({3.0, 5.0, 0.0, 15.0}, at::kDouble).view({1, 2, 2});
  const FftShard none;
  EXPECT_NEAR(field_relative_l2(pred, target, none).item<double>(), 0.35, 1e-15);
  EXPECT_NEAR(relative_l2(pred, target, none).item<double>(), std::sqrt(26.0 / 125.0), 1e-15);
  // One value per example, on a 2-D grid too.
  const at::Tensor t2 = at::ones({3, 4, 5, 6}, at::kDouble);
  EXPECT_TRUE(at::allclose(field_relative_l2(t2 * 1.1, t2, none), at::full({3}, 0.1, at::kDouble),
                           0.0, 1e-12));
}

}  // namespace
}  // namespace scaffold::fno
