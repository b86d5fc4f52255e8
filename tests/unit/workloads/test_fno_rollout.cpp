// The FNO task's recurrent time stepping (the paper's FNO-2D rollout): every predicted step is
// the model applied to the window of the t_in steps before it, taken from the input and from the
// rollout's own earlier predictions (built here by index, not by the task's loop); the training
// loss is the sum over steps of each step's relative L2 error, averaged over the batch, and the
// reported error that of the whole trajectory (both written here from their definitions); the
// gradient flows through every step (autograd against central differences in float64); the
// direct mode is one forward.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/batch_loader.hpp"
#include "data/example_source.hpp"
#include "workloads/fno/fno.hpp"
#include "workloads/fno/task.hpp"

namespace scaffold::fno {
namespace {

struct NoExamples : data::ExampleSource {
  std::size_t size() const override { return 0; }
  data::Example get(std::size_t, uint64_t) const override { return {}; }
};

constexpr int64_t kTin = 3, kSteps = 4, kC = 2;  // 3 steps in, 4 predicted, 2 channels per step

Fno small_model(at::ScalarType dtype) {
  torch::manual_seed(5);
  FnoOptions o;
  o.in_channels = kTin * kC;
  o.out_channels = kC;
  o.modes = {3, 3};
  o.width = 6;
  o.layers = 2;
  o.projection_channels = 8;
  Fno m(o);
  m->to(dtype);
  return m;
}

FnoTaskOptions recurrent_options() {
  FnoTaskOptions o;
  o.rollout_steps = kSteps;
  o.step_channels = kC;
  return o;
}

// ||a - b|| / ||b|| per example, over everything but the batch axis.
at::Tensor rel_l2(const at::Tensor& a, const at::Tensor& b) {
  const int64_t n = a.size(0);
  return (a - b).reshape({n, -1}).norm(2, 1) / b.reshape({n, -1}).norm(2, 1);
}

TEST(FnoRollout, EveryStepIsTheModelOnTheWindowOfTheStepsBeforeIt) {
  Fno model = small_model(at::kDouble);
  NoExamples none;
  FnoTask task(model, none, none, at::kCPU, recurrent_options());
  const at::Tensor input = at::randn({2, kTin * kC, 8, 6}, at::kDouble);
  at::Tensor out;
  {
    torch::NoGradGuard no_grad;
    out = task.predict(input);
  }
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, kSteps * kC, 8, 6}));
  // The trajectory: input steps 0 .. t_in - 1, then predicted steps t_in .. t_in + steps - 1.
  const auto step = [&](int64_t s) {
    return s < kTin ? input.narrow(1, s * kC, kC) : out.narrow(1, (s - kTin) * kC, kC);
  };
  torch::NoGradGuard no_grad;
  for (int64_t t = 0; t < kSteps; ++t) {
    std::vector<at::Tensor> window;
    for (int64_t s = t; s < t + kTin; ++s) window.push_back(step(s));
    const at::Tensor expect = model->forward(at::cat(window, 1));
    EXPECT_TRUE(at::allclose(out.narrow(1, t * kC, kC), expect, 1e-12, 1e-12)) << "step " << t;
  }
  // Steps differ (a rollout that repeated one prediction would pass the window check at t = 0).
  EXPECT_GT((out.narrow(1, 0, kC) - out.narrow(1, kC, kC)).abs().max().item<double>(), 1e-6);
}

TEST(FnoRollout, TrainsOnTheSumOfStepErrorsAndReportsTheTrajectoryError) {
  Fno model = small_model(at::kFloat);
  NoExamples none;
  FnoTask task(model, none, none, at::kCPU, recurrent_options());
  data::Batch batch;
  batch.fields = {at::randn({3, kTin * kC, 8, 6}), at::randn({3, kSteps * kC, 8, 6})};
  const train::TrainForward f = task.train_forward(batch);
  at::Tensor pred;
  {
    torch::NoGradGuard no_grad;
    pred = task.predict(batch.fields[0]).to(at::kDouble);
  }
  const at::Tensor y = batch.fields[1].to(at::kDouble);
  at::Tensor per_step = at::zeros({3}, at::kDouble);
  for (int64_t t = 0; t < kSteps; ++t)
    per_step += rel_l2(pred.narrow(1, t * kC, kC), y.narrow(1, t * kC, kC));
  EXPECT_NEAR(f.loss.item<double>(), per_step.mean().item<double>(),
              1e-5 * per_step.mean().item<double>());
  const double trajectory = rel_l2(pred, y).sum().item<double>();
  ASSERT_EQ(f.sums.numel(), 1);
  EXPECT_NEAR(f.sums.item<double>(), trajectory, 1e-5 * trajectory);
  // Validation reports the trajectory's error too (per example, summed): rel_l2, mse.
  const at::Tensor v = task.validation_sums(batch);
  EXPECT_NEAR(v[0].item<double>(), trajectory, 1e-5 * trajectory);
}

TEST(FnoRollout, GradientsFlowThroughEveryStep) {
  Fno model = small_model(at::kDouble);
  NoExamples none;
  FnoTask task(model, none, none, at::kCPU, recurrent_options());
  const at::Tensor input = at::randn({1, kTin * kC, 6, 6}, at::kDouble);
  const at::Tensor w = at::randn({1, kSteps * kC, 6, 6}, at::kDouble);
  // Only the last step weighted: its gradient reaches the weights through the fed-back steps.
  const at::Tensor last_only = at::zeros_like(w);
  last_only.narrow(1, (kSteps - 1) * kC, kC).copy_(w.narrow(1, (kSteps - 1) * kC, kC));
  const auto objective = [&] { return (task.predict(input) * last_only).sum(); };
  model->zero_grad();
  objective().backward();
  int checked = 0;
  for (const auto& p : model->named_parameters()) {
    at::Tensor param = p.value();
    if (param.is_complex()) continue;  // the real weights suffice to see the chain
    const at::Tensor g = param.grad().reshape(-1);
    const int64_t i = g.abs().argmax().item<int64_t>();
    const double h = 1e-6;
    double up = 0, down = 0;
    {
      torch::NoGradGuard no_grad;
      at::Tensor flat = param.view(-1);
      const double keep = flat[i].item<double>();
      flat[i].fill_(keep + h);
      up = objective().item<double>();
      flat[i].fill_(keep - h);
      down = objective().item<double>();
      flat[i].fill_(keep);
    }
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(g[i].item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd))) << p.key();
    ++checked;
  }
  EXPECT_GT(checked, 4);
}

TEST(FnoRollout, DirectModeIsOneForward) {
  torch::manual_seed(5);
  FnoOptions o;
  o.in_channels = 2;
  o.out_channels = 5;
  o.modes = {3, 3};
  o.width = 6;
  o.layers = 2;
  o.projection_channels = 8;
  Fno model(o);
  model->to(at::kDouble);
  NoExamples none;
  FnoTask task(model, none, none, at::kCPU, FnoTaskOptions{});
  const at::Tensor x = at::randn({2, 2, 8, 6}, at::kDouble);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(at::allclose(task.predict(x), model->forward(x), 0, 0));
}

}  // namespace
}  // namespace scaffold::fno
