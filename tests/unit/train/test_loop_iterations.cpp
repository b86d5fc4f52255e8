// The TrainingLoop's Megatron-style options on a model without batch statistics (a linear
// layer): Megatron's stream order, gradient accumulation of k micro-batches of b against one
// hand-made step on the k*b batch, the per-step learning rate against its closed-form effect, the
// step cap ending inside an epoch, the deadline ending after the step in flight, validation
// every n epochs on a few batches, and the clipping hook replacing torch's clipping. Also where a
// non-finite loss came from: the batch that first turned the sums non-finite, and whether its
// data held the NaN (issue 16's "training diverged" without the file). And dynamic loss scaling's
// start, growth interval and skipped steps, and Megatron's hysteresis and minimum scale against
// GradScaler's rule over a scripted pattern of overflows.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/example_source.hpp"
#include "data/sampler.hpp"
#include "dist/comm_counters.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "test_util.hpp"
#include "train/loop.hpp"
#include "train/sharded_adam.hpp"

namespace scaffold::train {
namespace {

constexpr int64_t kInputs = 3;

class LoopEnvironment : public ::testing::Environment {
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
    ::testing::AddGlobalTestEnvironment(new LoopEnvironment);

// Example i: x = (sin(i), cos(2i), i/10) and y = i mod 3, ids "i".
class Points : public data::ExampleSource {
 public:
  explicit Points(int64_t n) : n_(n) {}
  std::size_t size() const override { return static_cast<std::size_t>(n_); }
  data::Example get(std::size_t index, uint64_t) const override {
    const double i = static_cast<double>(index);
    const at::Tensor x = at::tensor({std::sin(i), std::cos(2 * i), i / 10}, at::kFloat);
    const at::Tensor y = at::tensor({static_cast<float>(index % 3)}, at::kFloat);
    return {{x, y}, std::to_string(index)};
  }

 private:
  int64_t n_;
};

at::Tensor mse(torch::nn::Linear& model, const at::Tensor& x, const at::Tensor& y) {
  return (model->forward(x) - y).square().mean();
}

// MSE of a linear layer; records the ids of every training batch and counts validation batches.
// mean_output: the loss is the mean prediction instead (d loss / d bias = 1 exactly).
class LinearTask : public TrainingTask {
 public:
  LinearTask(torch::nn::Linear model, const Points& train, const Points& val,
             bool mean_output = false)
      : model_(std::move(model)), train_(train), val_(val), mean_output_(mean_output) {}
  torch::nn::Module& module() override { return *model_; }
  const data::ExampleSource& training_set() const override { return train_; }
  const data::ExampleSource& validation_set() const override { return val_; }
  std::vector<std::string> training_sum_names() const override { return {"loss_x_batch"}; }
  std::vector<std::string> validation_sum_names() const override { return {"loss_x_batch"}; }
  TrainForward train_forward(const data::Batch& batch) override {
    for (const auto& id : batch.ids) seen.push_back(std::stoll(id));
    const at::Tensor loss = mean_output_ ? model_->forward(batch.fields[0]).mean()
                                         : mse(model_, batch.fields[0], batch.fields[1]);
    return {loss, (loss.detach() * static_cast<double>(batch.size())).to(at::kDouble).reshape({1})};
  }
  at::Tensor validation_sums(const data::Batch& batch) override {
    ++validation_batches;
    return (mse(model_, batch.fields[0], batch.fields[1]) * static_cast<double>(batch.size()))
        .to(at::kDouble)
        .reshape({1});
  }
  EpochMetrics epoch_metrics(int64_t, const PassSums& train, const PassSums&) const override {
    EpochMetrics m;
    m.values = {{"train_loss", train.sums[0] / std::max(train.samples, 1.0)}};
    return m;
  }

  std::vector<int64_t> seen;
  int validation_batches = 0;

 private:
  torch::nn::Linear model_;
  const Points& train_;
  const Points& val_;
  bool mean_output_;
};

torch::nn::Linear fresh_linear() {
  torch::manual_seed(3);
  return torch::nn::Linear(kInputs, 1);
}

LoopOptions sgd_options(int64_t local_batch, double lr) {
  LoopOptions o;
  o.local_batch_size = local_batch;
  o.loader_workers = 0;
  o.make_optimizer =
      [lr](const std::vector<at::Tensor>& p) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(lr));
  };
  return o;
}

dist::Communicator& world() {
  return LoopEnvironment::runtime()->world();
}
const dist::ProcessGrid& one_rank() {
  static const dist::ProcessGrid grid(1, 0, {1, 1, 1}, {2, 3, 4});
  return grid;
}

double max_abs_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

TEST(StreamIndices, FollowMegatronsSequentialOrderAcrossStepsAndReplicas) {
  // n 10, 2 replicas, micro-batch 2, 2 micro-batches per step: G = 8. Steps 1 and 2 are stream
  // samples 8..23; replica 1 takes the second pair of each group of 4: 10 11 | 14 15 | 18 19 |
  // 22 23, modulo 10.
  EXPECT_EQ(data::stream_indices(10, 2, 1, 1, 2, 2, 2),
            (std::vector<int64_t>{0, 1, 4, 5, 8, 9, 2, 3}));
  EXPECT_EQ(data::stream_indices(10, 2, 0, 0, 1, 2, 2), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(data::stream_indices(5, 1, 0, 3, 1, 3, 1), (std::vector<int64_t>{4, 0, 1}));
  EXPECT_THROW(data::stream_indices(0, 1, 0, 0, 1, 1, 1), std::exception);
}

// k micro-batches of b, accumulated, = one step on the k*b batch (no batch statistics): the
// loop with b = 2, k = 3 and with b = 6, k = 1 both match SGD steps made here by hand on the
// stream's consecutive batches of 6.
TEST(LoopIterations, AccumulatedMicroBatchesEqualOneStepOnTheWholeBatch) {
  const Points train(40), val(8);
  constexpr double kLr = 0.1;
  constexpr int64_t kSteps = 4;
  std::vector<std::vector<at::Tensor>> results;
  std::vector<std::vector<int64_t>> orders;
  for (const auto& [micro, k] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {6, 1}}) {
    LinearTask task(fresh_linear(), train, val);
    LoopOptions o = sgd_options(micro, kLr);
    o.accumulation_steps = k;
    o.train_batches_per_epoch = 2;
    o.max_steps = kSteps;
    TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
    std::vector<int64_t> steps_per_epoch, micro_per_epoch;
    const LoopResult r = loop.run([&](const LoopEpoch& e) {
      steps_per_epoch.push_back(e.optimizer_steps);
      micro_per_epoch.push_back(e.train.steps);
    });
    EXPECT_EQ(r.total_optimizer_steps, kSteps);
    EXPECT_EQ(steps_per_epoch, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(micro_per_epoch, (std::vector<int64_t>{2 * k, 2 * k}));
    results.push_back(task.module().parameters());
    orders.push_back(task.seen);
  }
  // Reference: the stream's batches [6t, 6t + 6), one mean-loss SGD step each.
  torch::nn::Linear ref = fresh_linear();
  torch::optim::SGD sgd(ref->parameters(), torch::optim::SGDOptions(kLr));
  std::vector<int64_t> expected_order;
  for (int64_t t = 0; t < kSteps; ++t) {
    std::vector<at::Tensor> xs, ys;
    for (int64_t i = 6 * t; i < 6 * t + 6; ++i) {
      const auto e = train.get(static_cast<std::size_t>(i % 40), 0);
      xs.push_back(e.fields[0]);
      ys.push_back(e.fields[1]);
      expected_order.push_back(i % 40);
    }
    sgd.zero_grad();
    mse(ref, at::stack(xs), at::stack(ys)).backward();
    sgd.step();
  }
  const auto expected = ref->parameters();
  for (std::size_t v = 0; v < results.size(); ++v) {
    EXPECT_EQ(orders[v], expected_order) << "variant " << v;
    const double err = max_abs_difference(results[v], expected);
    // fp32 sums in another order: ~1e-7; a micro-batch left out or not divided by k: ~1e-2.
    EXPECT_LT(err, 1e-6) << "variant " << v << ": max-abs parameter error " << err
                         << " (tolerance 1e-6)";
  }
  torch::nn::Linear initial = fresh_linear();
  EXPECT_GT(max_abs_difference(initial->parameters(), expected), 1e-3)
      << "the steps moved the parameters";
}

// The forward_backward hook (a pipeline schedule's seam): it gets each step's k micro-batches at
// once, in the loader's order, with the loss multiplier 1/k, and runs them in its own order (here
// backwards, the last micro-batch first); the parameters and the epoch's loss equal the default
// path's, and before_last_backward is called once per step.
TEST(LoopIterations, TheForwardBackwardHookRunsAStepsMicroBatchesInItsOwnOrder) {
  const Points train(40), val(8);
  constexpr int64_t kMicro = 2, kK = 3, kSteps = 4;
  std::vector<std::vector<at::Tensor>> results;
  std::vector<double> losses;
  int calls = 0, armed = 0;
  for (bool hook : {false, true}) {
    LinearTask task(fresh_linear(), train, val);
    LoopOptions o = sgd_options(kMicro, 0.1);
    o.accumulation_steps = kK;
    o.train_batches_per_epoch = kSteps;
    o.max_steps = kSteps;
    if (hook)
      o.forward_backward = [&](MicroBatchRun& run) {
        ++calls;
        EXPECT_EQ(run.batches.size(), static_cast<std::size_t>(kK));
        EXPECT_DOUBLE_EQ(run.loss_multiplier, 1.0 / kK);
        // Loader order: the stream's consecutive samples.
        for (std::size_t j = 0; j + 1 < run.batches.size(); ++j)
          EXPECT_EQ(std::stoll(run.batches[j + 1].ids[0]),
                    std::stoll(run.batches[j].ids[0]) + kMicro);
        at::Tensor sums = at::zeros({1}, at::kDouble);
        for (std::size_t j = run.batches.size(); j-- > 0;) {
          const TrainForward f = task.train_forward(run.batches[j]);
          if (j == 0) {
            run.before_last_backward();
            ++armed;
          }
          (f.loss * run.loss_multiplier).backward();
          sums += f.sums;
        }
        return sums;
      };
    TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
    double loss = 0;
    loop.run([&](const LoopEpoch& e) { loss = e.metrics.values[0].second; });
    results.push_back(task.module().parameters());
    losses.push_back(loss);
  }
  EXPECT_EQ(calls, kSteps);
  EXPECT_EQ(armed, kSteps);
  const double err = max_abs_difference(results[0], results[1]);
  EXPECT_LT(err, 1e-6) << "max-abs parameter error " << err << " (tolerance 1e-6)";
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * losses[0]);
  torch::nn::Linear initial = fresh_linear();
  EXPECT_GT(max_abs_difference(initial->parameters(), results[1]), 1e-3)
      << "the steps moved the parameters";
}

// d loss / d bias = 1 for the mean prediction of x = ..., so SGD's bias after the steps is
// bias0 - sum of the step LRs; max_steps 5 over 2-step epochs leaves a last epoch of 1 step.
TEST(LoopIterations, PerStepLearningRateAndAStepCapInsideAnEpoch) {
  const Points train(16), val(4);
  LinearTask task(fresh_linear(), train, val, /*mean_output=*/true);
  const double bias0 = fresh_linear()->bias.item<double>();
  LoopOptions o = sgd_options(2, 1.0);
  o.train_batches_per_epoch = 2;
  o.max_steps = 5;
  std::vector<int64_t> asked;
  o.lr_at_step = [&asked](int64_t step) {
    asked.push_back(step);
    return 0.01 * static_cast<double>(step + 1);
  };
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  std::vector<int64_t> steps;
  const LoopResult r = loop.run([&](const LoopEpoch& e) { steps.push_back(e.optimizer_steps); });
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(r.epochs_run, 3);
  EXPECT_EQ(r.total_optimizer_steps, 5);
  EXPECT_EQ(asked, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  const double bias = task.module().parameters()[1].item<double>();
  EXPECT_NEAR(bias, bias0 - 0.01 * (1 + 2 + 3 + 4 + 5), 1e-6);
}

// The loop knows no communicating module by name: whatever counter of dist/comm_counters.hpp moves
// inside a training step shows in comm_times().counter_s under its name, once per step it moved
// in; what moves outside the steps (here, in validation) does not.
class CountingTask : public LinearTask {
 public:
  using LinearTask::LinearTask;
  TrainForward train_forward(const data::Batch& batch) override {
    dist::count_comm("test.loop_step", 1, 8, 0.125);
    return LinearTask::train_forward(batch);
  }
  at::Tensor validation_sums(const data::Batch& batch) override {
    dist::count_comm("test.loop_validation", 1, 8, 1.0);
    return LinearTask::validation_sums(batch);
  }
};

TEST(LoopIterations, EveryCommunicationCounterIsTimedByNameOverTheSteps) {
  const Points train(16), val(4);
  CountingTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(2, 0.01);
  o.train_batches_per_epoch = 3;
  o.max_steps = 6;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  const LoopResult r = loop.run([](const LoopEpoch&) {});
  EXPECT_EQ(r.total_optimizer_steps, 6);
  EXPECT_DOUBLE_EQ(loop.comm_times().seconds_of("test.loop_step"), 6 * 0.125);
  EXPECT_GT(dist::comm_counter("test.loop_validation").calls, 0);
  EXPECT_EQ(loop.comm_times().seconds_of("test.loop_validation"), 0.0);
}

// Dynamic loss scaling with a chosen start and growth interval (CARAML's GradScaler(init_scale=1,
// growth_interval=100) for image classification): the scale doubles after every `interval` good
// steps, and the steps are those of unscaled SGD (d loss / d bias = 1: the bias falls by lr a
// step).
TEST(LoopLossScaling, StartsAtTheGivenScaleAndDoublesAfterTheGrowthInterval) {
  const Points train(20), val(4);
  LinearTask task(fresh_linear(), train, val, /*mean_output=*/true);
  const double bias0 = fresh_linear()->bias.item<double>();
  LoopOptions o = sgd_options(2, 0.01);
  o.max_epochs = 1;
  o.loss_scaling = true;
  o.loss_scale_init = 1.0;
  o.loss_scale_growth_interval = 3;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  EXPECT_EQ(loop.loss_scale(), 1.0);
  loop.run([](const LoopEpoch&) {});
  EXPECT_EQ(loop.loss_scale(), 8.0) << "10 good steps: doubled after the 3rd, 6th and 9th";
  EXPECT_EQ(loop.skipped_steps(), 0);
  EXPECT_NEAR(task.module().parameters()[1].item<double>(), bias0 - 0.01 * 10, 1e-6);
}

// A scale whose gradients overflow float (4e38 > 3.4e38) skips the step and halves; 2e38 fits
// (the gradients are the scale times at most 1.5), so one step of ten is skipped.
TEST(LoopLossScaling, ANonFiniteGradientSkipsTheStepAndHalvesTheScale) {
  const Points train(20), val(4);
  LinearTask task(fresh_linear(), train, val, /*mean_output=*/true);
  const double bias0 = fresh_linear()->bias.item<double>();
  LoopOptions o = sgd_options(2, 0.01);
  o.max_epochs = 1;
  o.loss_scaling = true;
  o.loss_scale_init = 4e38;
  o.loss_scale_growth_interval = 1000;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  loop.run([](const LoopEpoch&) {});
  EXPECT_EQ(loop.skipped_steps(), 1);
  EXPECT_EQ(loop.loss_scale(), 2e38);
  EXPECT_NEAR(task.module().parameters()[1].item<double>(), bias0 - 0.01 * 9, 1e-5);
}

// LinearTask (mean output, d loss / d bias = 1) whose loss is made infinite on the scripted
// optimizer steps (1-based), so their gradients are not finite; records the loss scale each step
// trained with (the loop's scale before that step's update).
class ScriptedOverflowTask : public LinearTask {
 public:
  ScriptedOverflowTask(const Points& train, const Points& val, std::string pattern)
      : LinearTask(fresh_linear(), train, val, /*mean_output=*/true),
        pattern_(std::move(pattern)) {}
  TrainForward train_forward(const data::Batch& batch) override {
    TrainForward out = LinearTask::train_forward(batch);
    scales.push_back(loop->loss_scale());
    const std::size_t step = first_step + scales.size() - 1;
    if (step < pattern_.size() && pattern_[step] == 'O')
      out.loss = out.loss * std::numeric_limits<double>::infinity();  // the sums stay finite
    return out;
  }
  const TrainingLoop* loop = nullptr;
  std::size_t first_step = 0;  // steps taken before this task's first (a resumed run)
  std::vector<double> scales;

 private:
  std::string pattern_;  // 'O' overflow, 'G' good, one letter per step
};

// Runs the pattern (batch 2, accumulation 1: one micro-batch per step) with the given scaler.
std::vector<double> scales_over(const std::string& pattern, double init, int64_t window,
                                double min_scale, int64_t hysteresis, double* final_scale,
                                int64_t* skipped, double* bias_drop) {
  const Points train(40), val(4);
  ScriptedOverflowTask task(train, val, pattern);
  const double bias0 = task.module().parameters()[1].item<double>();
  LoopOptions o = sgd_options(2, 0.01);
  o.train_batches_per_epoch = static_cast<int64_t>(pattern.size());
  o.max_steps = static_cast<int64_t>(pattern.size());
  o.validation_every = 0;
  o.loss_scaling = true;
  o.loss_scale_init = init;
  o.loss_scale_growth_interval = window;
  if (min_scale >= 0) o.loss_scale_min = min_scale;           // < 0: the option's default
  if (hysteresis >= 1) o.loss_scale_hysteresis = hysteresis;  // < 1: the option's default
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  task.loop = &loop;
  loop.run([](const LoopEpoch&) {});
  *final_scale = loop.loss_scale();
  *skipped = loop.skipped_steps();
  *bias_drop = bias0 - task.module().parameters()[1].item<double>();
  return task.scales;
}

// Megatron's DynamicGradScaler with CARAML's hysteresis 2 and min_loss_scale 1 (initial scale 8,
// window 3 to keep the script short), worked out by hand from its update rule (step: letter,
// scale it trained with, then what the update does):
//   1 O 8: hysteresis 2 -> 1, kept        2 O 8: 1 -> 0, halved to 4
//   3 O 4: 0 -> -1, halved to 2           4-6 G 2: 3rd good doubles to 4, hysteresis reset to 2
//   7 O 4: 2 -> 1, kept, good count 0     8-10 G 4: 3rd good doubles to 8, hysteresis 2
//   11 O 8: 2 -> 1, kept                  12 G 8: good count 1 (hysteresis stays 1)
//   13 O 8: 1 -> 0, halved to 4           14 O 4 and 15 O 2: halved to 2, then 1
//   16 O 1: max(0.5, 1) = 1               17 G 1
TEST(LoopLossScaling, MegatronsHysteresisAndMinimumScaleOverAScriptedPattern) {
  double final_scale = 0.0, bias_drop = 0.0;
  int64_t skipped = 0;
  const std::vector<double> scales =
      scales_over("OOOGGGOGGGOGOOOOG", 8.0, 3, 1.0, 2, &final_scale, &skipped, &bias_drop);
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 4, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 4, 2, 1, 1}));
  EXPECT_EQ(final_scale, 1.0);
  EXPECT_EQ(skipped, 9);
  EXPECT_NEAR(bias_drop, 0.01 * 8, 1e-6) << "the 8 good steps are unscaled SGD steps";
}

// The same pattern with the defaults image classification keeps (hysteresis 1, no minimum): torch's
// GradScaler, every overflow halves, 3 good steps in a row double:
//   8 -> 4 -> 2 -> 1 (steps 1-3); 1, 1, 1 then 2 (4-6); step 7 at 2 -> 1; 1, 1, 1 then 2 (8-10);
//   step 11 at 2 -> 1; step 12 at 1; steps 13-16 at 1, 0.5, 0.25, 0.125 -> 0.0625; step 17 at
//   0.0625.
TEST(LoopLossScaling, TheDefaultsAreGradScalersRuleUnchanged) {
  double final_scale = 0.0, bias_drop = 0.0;
  int64_t skipped = 0;
  const std::vector<double> scales =
      scales_over("OOOGGGOGGGOGOOOOG", 8.0, 3, -1.0, 0, &final_scale, &skipped, &bias_drop);
  EXPECT_EQ(scales,
            (std::vector<double>{8, 4, 2, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 0.5, 0.25, 0.125, 0.0625}));
  EXPECT_EQ(final_scale, 0.0625);
  EXPECT_EQ(skipped, 9);
  EXPECT_NEAR(bias_drop, 0.01 * 8, 1e-6);
}

// The scaler's state (scale, good-step count, hysteresis count) is in the checkpoint, as Megatron
// saves its grad scaler: 12 steps of the pattern above with checkpoints every 6, then a fresh
// loop (started at scale 64, to show the checkpoint's scale wins) resumes: after step 12 the
// scale is 8 with hysteresis count 1, so steps 13-17 train at 8 4 2 1 1 as in the table. A fresh
// scaler would give 64 64 32 16 8; one with the scale but hysteresis reset to 2, 8 8 4 2 1.
TEST(LoopLossScaling, TheScalersStateIsCheckpointedAndResumed) {
  const std::string pattern = "OOOGGGOGGGOGOOOOG";
  test::TempDir dir;
  const Points train(40), val(4);
  bool resume_scale = true;
  const auto options = [&](int64_t steps, double init) {
    LoopOptions o = sgd_options(2, 0.01);
    o.train_batches_per_epoch = 6;
    o.max_steps = steps;
    o.validation_every = 0;
    o.loss_scaling = true;
    o.loss_scale_init = init;
    o.loss_scale_growth_interval = 3;
    o.loss_scale_min = 1.0;
    o.loss_scale_hysteresis = 2;
    o.checkpoint_interval = 1;
    o.checkpoint_dir = dir.path();
    o.loss_scale_resumed = resume_scale;
    return o;
  };
  {
    ScriptedOverflowTask first(train, val, pattern);
    TrainingLoop loop(first, options(12, 8.0), c10::Device(c10::kCPU), world(), one_rank());
    first.loop = &loop;
    loop.run([](const LoopEpoch&) {});
    ASSERT_EQ(first.scales, (std::vector<double>{8, 8, 4, 2, 2, 2, 4, 4, 4, 4, 8, 8}));
  }
  ScriptedOverflowTask resumed(train, val, pattern);
  resumed.first_step = 12;
  TrainingLoop loop(resumed, options(17, 64.0), c10::Device(c10::kCPU), world(), one_rank());
  resumed.loop = &loop;
  loop.resume(dir.path());
  EXPECT_EQ(loop.loss_scale(), 8.0);
  loop.run([](const LoopEpoch&) {});
  EXPECT_EQ(resumed.scales, (std::vector<double>{8, 4, 2, 1, 1}));

  // loss_scale_resumed 0 (image classification): the resumed run starts from its own scale (64).
  resume_scale = false;
  ScriptedOverflowTask again(train, val, pattern);
  again.first_step = 12;
  TrainingLoop fresh(again, options(17, 64.0), c10::Device(c10::kCPU), world(), one_rank());
  again.loop = &fresh;
  fresh.resume(dir.path());
  EXPECT_EQ(fresh.loss_scale(), 64.0);
}

TEST(LoopLossScaling, AMinimumAboveTheInitialScaleOrAHysteresisBelowOneIsRefused) {
  const Points train(8), val(4);
  LinearTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(2, 0.01);
  o.loss_scaling = true;
  o.loss_scale_init = 4.0;
  o.loss_scale_min = 8.0;
  EXPECT_THROW(TrainingLoop(task, o, c10::Device(c10::kCPU), world(), one_rank()), core::Error);
  o.loss_scale_min = 1.0;
  o.loss_scale_hysteresis = 0;
  EXPECT_THROW(TrainingLoop(task, o, c10::Device(c10::kCPU), world(), one_rank()), core::Error);
}

TEST(LoopIterations, ADeadlineEndsTheRunAfterTheStepInFlightAndReportsThatEpoch) {
  const Points train(16), val(4);
  LinearTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(2, 0.1);
  o.train_batches_per_epoch = 4;
  o.deadline_mono_s = core::monotonic_s();  // already passed
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  std::vector<int64_t> steps;
  const LoopResult r = loop.run([&](const LoopEpoch& e) { steps.push_back(e.optimizer_steps); });
  EXPECT_TRUE(r.deadline_reached);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(steps, (std::vector<int64_t>{1}));
  EXPECT_EQ(r.total_optimizer_steps, 1);
}

TEST(LoopIterations, ValidationEveryNEpochsOnAFewBatches) {
  const Points train(16), val(8);
  LinearTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(2, 0.1);
  o.train_batches_per_epoch = 1;
  o.max_epochs = 4;
  o.validation_every = 2;
  o.validation_batches = 1;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  std::vector<bool> validated;
  std::vector<double> val_samples;
  loop.run([&](const LoopEpoch& e) {
    validated.push_back(e.validated);
    val_samples.push_back(e.val.samples);
  });
  EXPECT_EQ(validated, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(val_samples, (std::vector<double>{0, 2, 0, 2}));
  EXPECT_EQ(task.validation_batches, 2);
}

// Dataset epochs with accumulation: 10 examples, b 2, k 2 -> two whole optimizer steps (8
// examples); the clipping hook runs before each step instead of torch's clipping (a 1e-9 clip
// would otherwise leave the parameters where they were).
TEST(LoopIterations, DatasetEpochsKeepWholeStepsAndTheClipHookReplacesTorchsClipping) {
  const Points train(10), val(4);
  LinearTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(2, 0.1);
  o.accumulation_steps = 2;
  o.max_epochs = 1;
  o.grad_clip_norm = 1e-9;
  std::vector<double> clip_args;
  o.clip_gradients = [&clip_args](double max_norm, torch::optim::Optimizer&) {
    clip_args.push_back(max_norm);
  };
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  int64_t steps = 0, micro = 0;
  loop.run([&](const LoopEpoch& e) {
    steps = e.optimizer_steps;
    micro = e.train.steps;
  });
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(micro, 4);
  EXPECT_EQ(task.seen.size(), 8u);
  EXPECT_EQ(clip_args, (std::vector<double>{1e-9, 1e-9}));
  torch::nn::Linear initial = fresh_linear();
  EXPECT_GT(max_abs_difference(initial->parameters(), task.module().parameters()), 1e-4);
}

// Points with a NaN in example `bad`'s second input; origin(i) names a made-up file per example.
class PointsWithNaN : public Points {
 public:
  PointsWithNaN(int64_t n, int64_t bad) : Points(n), bad_(bad) {}
  data::Example get(std::size_t index, uint64_t draw) const override {
    data::Example e = Points::get(index, draw);
    if (static_cast<int64_t>(index) == bad_) e.fields[0][1] = std::nanf("");
    return e;
  }
  std::string origin(std::size_t index) const override {
    return "/data/point" + std::to_string(index) + ".npy";
  }

 private:
  int64_t bad_;
};

// LinearTask whose epoch metrics refuse a non-finite loss, as every workload's task does.
class DivergenceCheckingTask : public LinearTask {
 public:
  using LinearTask::LinearTask;
  EpochMetrics epoch_metrics(int64_t epoch, const PassSums& train,
                             const PassSums& val) const override {
    if (!std::isfinite(train.sums[0]) || !std::isfinite(val.sums[0]))
      throw core::Error("training diverged at epoch " + std::to_string(epoch));
    return LinearTask::epoch_metrics(epoch, train, val);
  }
};

TEST(LoopNonFinite, TheErrorNamesTheFirstNonFiniteBatchAndTheFileWithTheNaN) {
  const PointsWithNaN train(12, /*bad=*/7);
  const Points val(4);
  DivergenceCheckingTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(/*local_batch=*/3, 0.01);
  o.max_epochs = 1;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  std::string message;
  try {
    loop.run([](const LoopEpoch&) {});
  } catch (const dist::AgreedError& e) {
    message = e.what();
  }
  // Reference: where example 7 came in this epoch's order, as the task saw the batches.
  const auto at = std::find(task.seen.begin(), task.seen.end(), 7) - task.seen.begin();
  ASSERT_LT(static_cast<std::size_t>(at), task.seen.size());
  const int64_t batch = at / 3 + 1;
  EXPECT_NE(
      message.find(
          "training diverged at epoch 1; the training sums first turned non-finite in optimizer "
          "step " +
          std::to_string(batch) + " (batch " + std::to_string(batch) + " of epoch 1)"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("/data/point7.npy holds NaN (field 0, element [1])"), std::string::npos)
      << message;
  EXPECT_NE(message.find("replace or regenerate the data"), std::string::npos) << message;
}

TEST(LoopNonFinite, FiniteDataThatDivergesIsSaidToBeFinite) {
  const Points train(12), val(4);
  DivergenceCheckingTask task(fresh_linear(), train, val);
  LoopOptions o = sgd_options(/*local_batch=*/3, 1e30);  // each SGD step multiplies the error
  o.max_epochs = 1;
  TrainingLoop loop(task, o, c10::Device(c10::kCPU), world(), one_rank());
  std::string message;
  try {
    loop.run([](const LoopEpoch&) {});
  } catch (const dist::AgreedError& e) {
    message = e.what();
  }
  EXPECT_NE(
      message.find(
          "training diverged at epoch 1; the training sums first turned non-finite in optimizer "
          "step "),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("is finite, so the model diverged, not the data"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("holds NaN"), std::string::npos) << message;
}

// The distributed optimizer on one rank takes the clip factor into its slices' update: fused and
// with LibTorch's operations, the step equals the step on gradients multiplied first, to the bit,
// and the gradients are left as they were.
TEST(ShardedAdamWClipFactor, StepsAsOnTheClippedGradients) {
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "LibTorch's operations");
    at::manual_seed(21);
    std::vector<at::Tensor> ours{at::randn({40000}).requires_grad_(),
                                 at::randn({7, 5}).requires_grad_()};
    std::vector<at::Tensor> theirs;
    for (const at::Tensor& p : ours) {
      p.mutable_grad() = at::randn_like(p);
      theirs.push_back(p.detach().clone().requires_grad_());
      theirs.back().mutable_grad() = p.grad().clone();
    }
    const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
    ShardedAdamW folding({torch::optim::OptimizerParamGroup(ours)}, options, nullptr,
                         ShardedAdamW::kGatherChunk, fused);
    ShardedAdamW multiplying({torch::optim::OptimizerParamGroup(theirs)}, options, nullptr,
                             ShardedAdamW::kGatherChunk, fused);
    const float factor = 0.3f;
    folding.scale_next_gradients(factor);
    for (const at::Tensor& p : theirs) p.mutable_grad().mul_(factor);
    folding.step();
    multiplying.step();
    EXPECT_EQ(folding.next_gradient_scale(), 1.f);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      EXPECT_TRUE(at::equal(ours[i], theirs[i])) << "parameter " << i;
      EXPECT_FALSE(at::equal(ours[i].grad(), theirs[i].grad())) << "gradient " << i << " unscaled";
    }
  }
}

}  // namespace
}  // namespace scaffold::train
