// The benchmark's SegmentationTask on the shared TrainingLoop, on a tiny learnable dataset
// (docs/benchmark.md): warm-up leaves model, optimiser, counters and RNG bit-identical (and would
// not if it skipped the restore), a resumed run continues exactly like the uninterrupted one, a
// corrupt checkpoint_last falls back to checkpoint_best, an oversized batch is refused and a
// non-finite loss stops training. Serialisation itself: test_checkpoint_state. Bit-identity needs
// one intra-op thread and fp32 (no autocast); both are set here.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <c10/util/string_utils.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "data/batch_loader.hpp"
#include "data/sampler.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"
#include "unit/train/tensor_identical.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/loss.hpp"
#include "workloads/scaffold/model/unet.hpp"
#include "workloads/scaffold/segmentation_task.hpp"

namespace scaffold::train {
namespace {

namespace fs = std::filesystem;
using dataset::DatasetPaths;
using dataset::FractalDataset;
using dataset::Split;

constexpr int64_t kSide = 8;
constexpr int kTrainVolumes = 6;
constexpr int kValVolumes = 2;
constexpr int kClasses = 3;
constexpr uint64_t kModelSeed = 7;
// Every comparison in this file is exact: same thread count, same data order, no autocast.

// MPI singleton (no mpirun) for the whole binary, one intra-op thread for bit-reproducibility.
class TrainerEnvironment : public ::testing::Environment {
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
    ::testing::AddGlobalTestEnvironment(new TrainerEnvironment);

dist::Communicator& world() {
  return TrainerEnvironment::runtime()->world();
}
const dist::ProcessGrid& single_grid() {
  static const dist::ProcessGrid grid(1, 0, {1, 1, 1}, {2, 3, 4});
  return grid;
}

// ---- comparisons (docs/architecture.md: tolerance 0 here, max-abs error, first offender) ------

using test::identical;

std::vector<at::Tensor> clone_parameters(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

// Every parameter bit-identical, with the name of each one that is not.
void expect_same_parameters(torch::nn::Module& actual, const std::vector<at::Tensor>& expected,
                            const std::string& what) {
  const auto named = actual.named_parameters();
  ASSERT_EQ(named.size(), expected.size()) << what;
  for (std::size_t i = 0; i < named.size(); ++i)
    EXPECT_TRUE(identical(named[i].value(), expected[i], what + " " + named[i].key()));
}

// How many parameters differ from `reference` at all (to show a comparison can fail).
int count_different_parameters(torch::nn::Module& m, const std::vector<at::Tensor>& reference) {
  const auto params = m.parameters();
  int n = 0;
  for (std::size_t i = 0; i < params.size(); ++i) n += at::equal(params[i], reference[i]) ? 0 : 1;
  return n;
}

const torch::optim::AdamParamState* adam_state(const torch::optim::Optimizer& opt,
                                               const at::Tensor& p) {
  const auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
  if (it == opt.state().end()) return nullptr;
  return static_cast<const torch::optim::AdamParamState*>(it->second.get());
}

// Per-parameter Adam state and the group options of two optimisers over same-shaped models.
void expect_same_adam(torch::nn::Module& actual_model, const torch::optim::Optimizer& actual,
                      torch::nn::Module& expected_model, const torch::optim::Optimizer& expected) {
  EXPECT_EQ(actual.state().size(), expected.state().size()) << "Adam states";
  const auto pa = actual_model.named_parameters();
  const auto pe = expected_model.parameters();
  ASSERT_EQ(pa.size(), pe.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const std::string name = "Adam state of " + pa[i].key();
    const auto* sa = adam_state(actual, pa[i].value());
    const auto* se = adam_state(expected, pe[i]);
    ASSERT_EQ(sa != nullptr, se != nullptr) << name;
    if (!sa) continue;
    EXPECT_EQ(sa->step(), se->step()) << name;
    EXPECT_TRUE(identical(sa->exp_avg(), se->exp_avg(), name + " exp_avg"));
    EXPECT_TRUE(identical(sa->exp_avg_sq(), se->exp_avg_sq(), name + " exp_avg_sq"));
    EXPECT_EQ(sa->max_exp_avg_sq().defined(), se->max_exp_avg_sq().defined()) << name;
  }
  ASSERT_EQ(actual.param_groups().size(), expected.param_groups().size());
  for (std::size_t g = 0; g < actual.param_groups().size(); ++g) {
    const auto& oa =
        static_cast<const torch::optim::AdamOptions&>(actual.param_groups()[g].options());
    const auto& oe =
        static_cast<const torch::optim::AdamOptions&>(expected.param_groups()[g].options());
    EXPECT_EQ(oa.lr(), oe.lr()) << "group " << g;
    EXPECT_EQ(oa.betas(), oe.betas()) << "group " << g;
    EXPECT_EQ(oa.eps(), oe.eps()) << "group " << g;
    EXPECT_EQ(oa.weight_decay(), oe.weight_decay()) << "group " << g;
  }
}

void expect_same_counters(const TrainCounters& a, const TrainCounters& e, const std::string& what) {
  EXPECT_EQ(a.epoch, e.epoch) << what;
  EXPECT_EQ(a.total_optimizer_steps, e.total_optimizer_steps) << what;
  EXPECT_EQ(a.stop_value, e.stop_value) << what;
  EXPECT_EQ(a.val_loss_avg, e.val_loss_avg) << what;
  EXPECT_EQ(a.best_val_loss, e.best_val_loss) << what;
}

// Every field of an epoch's record that does not depend on the clock.
void expect_same_stats(const benchmark::EpochStats& a, const benchmark::EpochStats& e) {
  const std::string what = "epoch " + std::to_string(e.epoch);
  EXPECT_EQ(a.epoch, e.epoch) << what;
  EXPECT_EQ(a.epoch_loss, e.epoch_loss) << what;
  EXPECT_EQ(a.overall_loss, e.overall_loss) << what;
  EXPECT_EQ(a.val_loss_epoch, e.val_loss_epoch) << what;
  EXPECT_EQ(a.val_loss_avg, e.val_loss_avg) << what;
  EXPECT_EQ(a.train_dice, e.train_dice) << what;
  EXPECT_EQ(a.val_dice, e.val_dice) << what;
  EXPECT_EQ(a.optimizer_steps, e.optimizer_steps) << what;
  EXPECT_EQ(a.total_optimizer_steps, e.total_optimizer_steps) << what;
  EXPECT_EQ(a.next_lr, e.next_lr) << what;
}

// ---- fixture: a learnable 8^3 dataset
// ------------------------------------------------------------

// Two random boxes per volume, labelled 1 and 2 (the second may cover part of the first); the image
// holds colour (1,0,0) on class 1, (0,1,0) on class 2 and (0,0,0.5) on background, so the classes
// are separable voxel by voxel.
void write_volume(const DatasetPaths& paths, Split split, int volume) {
  std::mt19937 rng(
      static_cast<unsigned>(1000 + 17 * volume + (split == Split::Validation ? 500 : 0)));
  std::vector<uint16_t> mask(static_cast<std::size_t>(kSide * kSide * kSide), 0);
  for (uint16_t label = 1; label < kClasses; ++label) {
    int64_t lo[3], hi[3];
    for (int a = 0; a < 3; ++a) {
      const int64_t size = 2 + static_cast<int64_t>(rng() % 4);  // 2..5
      lo[a] = static_cast<int64_t>(rng() % static_cast<unsigned>(kSide - size + 1));
      hi[a] = lo[a] + size;
    }
    for (int64_t z = lo[0]; z < hi[0]; ++z)
      for (int64_t y = lo[1]; y < hi[1]; ++y)
        for (int64_t x = lo[2]; x < hi[2]; ++x)
          mask[static_cast<std::size_t>((z * kSide + y) * kSide + x)] = label;
  }
  const std::size_t v = mask.size();
  std::vector<float> image(3 * v, 0.0f);
  for (std::size_t i = 0; i < v; ++i) {
    if (mask[i] == 1) image[i] = 1.0f;
    if (mask[i] == 2) image[v + i] = 1.0f;
    if (mask[i] == 0) image[2 * v + i] = 0.5f;
  }
  core::write_npy(paths.volume_file(split, volume, 0), core::DType::Float32,
                  {3, kSide, kSide, kSide}, image.data());
  core::write_npy(paths.mask_file(split, volume, 0), core::DType::UInt16, {kSide, kSide, kSide},
                  mask.data());
}

struct TinyDataset {
  TinyDataset() {
    for (Split s : {Split::Training, Split::Validation}) {
      core::create_directories(paths.volumes_dir(s));
      core::create_directories(paths.masks_dir(s));
    }
    for (int v = 0; v < kTrainVolumes; ++v) write_volume(paths, Split::Training, v);
    for (int v = 0; v < kValVolumes; ++v) write_volume(paths, Split::Validation, v);
    train =
        std::make_unique<FractalDataset>(paths, Split::Training, dataset::ShardLayout(), 0, kSide);
    val = std::make_unique<FractalDataset>(paths, Split::Validation, dataset::ShardLayout(), 0,
                                           kSide);
  }
  test::TempDir dir;
  DatasetPaths paths{dir.path()};
  std::unique_ptr<FractalDataset> train, val;
};

model::UNet3d tiny_model(uint64_t seed = kModelSeed) {
  torch::manual_seed(seed);
  model::UNetOptions o;
  o.in_channels = 3;
  o.n_classes = kClasses;
  o.layers = 1;
  o.base_channels = 4;
  o.group_norm_groups = 2;
  return model::UNet3d(o);
}

benchmark::SegmentationOptions tiny_options() {
  benchmark::SegmentationOptions o;
  o.local_batch_size = 2;  // 3 training steps and 1 validation batch per epoch
  o.epochs = 1;
  o.target_dice = 1.5;  // never reached: the epoch cap decides
  o.warmup_batches = 2;
  o.optimizer = "ADAM";
  o.learning_rate = 1e-2;
  o.min_learning_rate = 1e-3;
  o.T_0 = 2;  // the LR changes from epoch to epoch, so a resume must get it right
  o.T_mult = 1;
  o.amp_bf16 = false;
  o.seed = 5;
  o.n_classes = kClasses;
  o.ce_weight_sample_fraction = 0.5;
  o.loader_workers = 0;
  return o;
}

class TrainerTest : public ::testing::Test {
 protected:
  std::unique_ptr<benchmark::SegmentationTraining> make_trainer(
      const benchmark::SegmentationOptions& options, uint64_t seed = kModelSeed) {
    auto t = std::make_unique<benchmark::SegmentationTraining>(
        benchmark::make_segmentation_training(tiny_model(seed), options, *data_.train, *data_.val,
                                              c10::Device(c10::kCPU), world(), single_grid()));
    t->task->estimate_class_weights(world());
    return t;
  }
  TinyDataset data_;
};

std::vector<benchmark::EpochStats> run_collect(benchmark::SegmentationTraining& t,
                                               train::LoopResult* result = nullptr) {
  std::vector<benchmark::EpochStats> stats;
  train::LoopResult r = t.loop->run([&](const train::LoopEpoch& loop_epoch) {
    const benchmark::EpochStats s = benchmark::epoch_stats(loop_epoch);
    stats.push_back(s);
  });
  if (result) *result = r;
  return stats;
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const core::Error& e) {
    return e.what();
  }
  return "(no core::Error thrown)";
}

// ---- 1. warm-up ------------------------------------------------------------------------------

// The warm-up's training steps done by hand on a trainer's own model and optimiser, as Trainer
// does them (epoch-0 order, fp32, clip, Adam step) but without the restore.
void warmup_steps_without_restore(benchmark::SegmentationTraining& t,
                                  const benchmark::SegmentationOptions& o,
                                  const FractalDataset& train) {
  auto indices = data::training_indices(static_cast<int64_t>(train.size()), 1, 0, o.seed, 0);
  indices.resize(static_cast<std::size_t>(o.warmup_batches * o.local_batch_size));
  data::BatchLoader loader(train, indices, static_cast<int>(o.local_batch_size), 0, false);
  const at::Tensor weights = at::tensor(at::ArrayRef<double>(t.task->class_weights()),
                                        at::TensorOptions().dtype(at::kDouble))
                                 .to(at::kFloat);
  t.task->model()->train();
  data::Batch batch;
  while (loader.next(&batch)) {
    const LossTerms terms =
        segmentation_loss(t.task->model()->forward(batch.fields[0]), batch.fields[1], weights);
    t.loop->optimizer().zero_grad();
    terms.loss.backward();
    torch::nn::utils::clip_grad_norm_(t.task->model()->parameters(), o.grad_clip_norm);
    t.loop->optimizer().step();
  }
}

TEST_F(TrainerTest, WarmupRestoresModelOptimiserCountersAndRngExactly) {
  const benchmark::SegmentationOptions options = tiny_options();
  auto warmed = make_trainer(options);
  const std::vector<at::Tensor> before = clone_parameters(*warmed->task->model());
  const TrainCounters counters_before = warmed->loop->counters();
  const double lr_before = warmed->loop->optimizer().param_groups()[0].options().get_lr();
  const at::Tensor rng_before = at::detail::getDefaultCPUGenerator().get_state();
  ASSERT_TRUE(warmed->loop->optimizer().state().empty());

  const double warmup_s = warmed->loop->warmup();
  EXPECT_GE(warmup_s, 0.0);

  expect_same_parameters(*warmed->task->model(), before, "after warm-up:");
  EXPECT_TRUE(warmed->loop->optimizer().state().empty())
      << warmed->loop->optimizer().state().size() << " parameters kept Adam state from the warm-up";
  EXPECT_EQ(warmed->loop->optimizer().param_groups()[0].options().get_lr(), lr_before);
  expect_same_counters(warmed->loop->counters(), counters_before, "counters after warm-up");
  EXPECT_TRUE(identical(at::detail::getDefaultCPUGenerator().get_state(), rng_before,
                        "CPU generator state after warm-up"));
  EXPECT_TRUE(warmed->task->model()->is_training()) << "warm-up must leave the model in train mode";

  // One epoch after the warm-up == one epoch without it.
  const auto warmed_stats = run_collect(*warmed);
  auto cold = make_trainer(options);
  const auto cold_stats = run_collect(*cold);
  ASSERT_EQ(warmed_stats.size(), 1u);
  ASSERT_EQ(cold_stats.size(), 1u);
  const std::vector<at::Tensor> cold_params = clone_parameters(*cold->task->model());
  expect_same_parameters(*warmed->task->model(), cold_params, "epoch 1 after warm-up vs without:");
  expect_same_stats(warmed_stats[0], cold_stats[0]);
  expect_same_counters(warmed->loop->counters(), cold->loop->counters(), "counters after epoch 1");
  expect_same_adam(*warmed->task->model(), warmed->loop->optimizer(), *cold->task->model(),
                   cold->loop->optimizer());

  // The check above can fail: the same warm-up steps left in place change the parameters, and the
  // epoch trained from there ends somewhere else.
  auto unrestored = make_trainer(options);
  warmup_steps_without_restore(*unrestored, options, *data_.train);
  EXPECT_GT(count_different_parameters(*unrestored->task->model(), before), 0)
      << "the warm-up steps did not move any parameter, so the restore check proves nothing";
  EXPECT_FALSE(unrestored->loop->optimizer().state().empty());
  run_collect(*unrestored);
  EXPECT_GT(count_different_parameters(*unrestored->task->model(), cold_params), 0)
      << "an epoch after unrestored warm-up steps matched the cold epoch";
}

TEST_F(TrainerTest, WarmupWithZeroBatchesTouchesNothing) {
  benchmark::SegmentationOptions options = tiny_options();
  options.warmup_batches = 0;
  auto t = make_trainer(options);
  const std::vector<at::Tensor> before = clone_parameters(*t->task->model());
  t->loop->warmup();
  expect_same_parameters(*t->task->model(), before, "after a zero-batch warm-up:");
  EXPECT_TRUE(t->loop->optimizer().state().empty());
}

// Which samples the warm-up reads (docs/benchmark.md, 'Training'): the first min(warmup_batches,
// len(loader)) batches of the sampler's epoch-0 order, and as many validation batches.
TEST_F(TrainerTest, WarmupReadsTheFirstBatchesOfTheEpochZeroOrder) {
  const benchmark::SegmentationOptions options = tiny_options();
  auto t = make_trainer(options);
  std::vector<std::string> train_log, val_log;
  data_.train->set_open_log(&train_log);
  data_.val->set_open_log(&val_log);
  t->loop->warmup();
  data_.train->set_open_log(nullptr);
  data_.val->set_open_log(nullptr);

  const auto order = data::training_indices(kTrainVolumes, 1, 0, options.seed, 0);
  std::vector<std::string> expected;
  for (int64_t k = 0; k < options.warmup_batches * options.local_batch_size; ++k) {
    const int volume =
        std::stoi(data_.train->ids()[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])]);
    expected.push_back(data_.paths.volume_file(Split::Training, volume, 0).string());
    expected.push_back(data_.paths.mask_file(Split::Training, volume, 0).string());
  }
  EXPECT_EQ(train_log, expected);
  // One validation batch of 2 holds the whole validation split.
  EXPECT_EQ(val_log.size(), 2u * kValVolumes);
}

// A warm-up after a resume must bring back the resumed Adam moments, not just an empty optimiser.
TEST_F(TrainerTest, WarmupAfterResumeRestoresTheResumedAdamState) {
  test::TempDir dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.checkpoint_interval = 1;
  options.checkpoint_dir = dir.path();
  run_collect(*make_trainer(options));

  benchmark::SegmentationOptions two = options;
  two.epochs = 2;
  two.checkpoint_interval = -1;
  auto warmed = make_trainer(two, 21);
  auto reference = make_trainer(two, 22);
  warmed->loop->resume(dir.path());
  reference->loop->resume(dir.path());
  const std::vector<at::Tensor> before = clone_parameters(*warmed->task->model());
  ASSERT_FALSE(warmed->loop->optimizer().state().empty());

  warmed->loop->warmup();
  expect_same_parameters(*warmed->task->model(), before, "after warm-up on a resumed trainer:");
  expect_same_adam(*warmed->task->model(), warmed->loop->optimizer(), *reference->task->model(),
                   reference->loop->optimizer());
  expect_same_counters(warmed->loop->counters(), reference->loop->counters(),
                       "counters after warm-up");

  const auto warmed_stats = run_collect(*warmed);
  const auto reference_stats = run_collect(*reference);
  ASSERT_EQ(warmed_stats.size(), 1u);
  ASSERT_EQ(reference_stats.size(), 1u);
  expect_same_stats(warmed_stats[0], reference_stats[0]);
  expect_same_parameters(*warmed->task->model(), clone_parameters(*reference->task->model()),
                         "epoch 2 after warm-up vs without:");
}

// ---- 2. checkpoint round trip ------------------------------------------------------------------

TEST_F(TrainerTest, ResumedRunContinuesExactlyLikeTheUninterruptedOne) {
  test::TempDir original_dir, copy_dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 3;
  options.checkpoint_interval = 1;
  options.checkpoint_dir = original_dir.path();

  // The original runs epochs 1..3 without stopping. It reports each epoch before writing that
  // epoch's checkpoint, so at epoch 2's report the directory still holds epoch 1's files: copy
  // them then, and snapshot the state they must hold at epoch 1's report.
  auto original = make_trainer(options);
  std::vector<benchmark::EpochStats> original_stats;
  std::vector<at::Tensor> params_at_1;
  TrainCounters counters_at_1;
  bool copied = false;
  original->loop->run([&](const train::LoopEpoch& loop_epoch) {
    const benchmark::EpochStats s = benchmark::epoch_stats(loop_epoch);
    original_stats.push_back(s);
    if (s.epoch == 1) {
      params_at_1 = clone_parameters(*original->task->model());
      counters_at_1 = original->loop->counters();
    }
    if (s.epoch == 2) {
      for (const char* name : {"checkpoint_last", "checkpoint_best"})
        fs::copy_file(original_dir.path() / name, copy_dir.path() / name);
      copied = true;
    }
  });
  ASSERT_TRUE(copied);
  ASSERT_EQ(original_stats.size(), 3u);
  EXPECT_EQ(counters_at_1.epoch, 1);
  EXPECT_EQ(counters_at_1.total_optimizer_steps, 3);
  EXPECT_EQ(counters_at_1.stop_value, original_stats[0].val_dice);
  EXPECT_EQ(counters_at_1.best_val_loss, original_stats[0].val_loss_avg);

  // A fresh model from another seed, so a parameter the resume forgot would show.
  benchmark::SegmentationOptions resumed_options = options;
  resumed_options.checkpoint_dir = copy_dir.path();
  auto resumed = make_trainer(resumed_options, kModelSeed + 1);
  ASSERT_GT(count_different_parameters(*resumed->task->model(), params_at_1), 0);
  const TrainCounters restored = resumed->loop->resume(copy_dir.path());
  expect_same_counters(restored, counters_at_1, "counters returned by resume");
  expect_same_counters(resumed->loop->counters(), counters_at_1, "counters after resume");
  expect_same_parameters(*resumed->task->model(), params_at_1, "resumed at epoch 1:");

  // Adam state at epoch 1: load the same checkpoint through the free function into a third
  // trainer's objects and compare with what resume() produced (exp_avg etc. must be non-trivial).
  {
    auto reference = make_trainer(options, kModelSeed + 2);
    load_checkpoint(copy_dir.path() / "checkpoint_last", *reference->task->model(),
                    reference->loop->optimizer());
    expect_same_adam(*resumed->task->model(), resumed->loop->optimizer(), *reference->task->model(),
                     reference->loop->optimizer());
    const auto* s = adam_state(resumed->loop->optimizer(), resumed->task->model()->parameters()[0]);
    ASSERT_NE(s, nullptr) << "resume restored no Adam state";
    EXPECT_EQ(s->step(), 3);
    EXPECT_GT(s->exp_avg_sq().abs().max().item<double>(), 0.0);
  }

  train::LoopResult result;
  const auto resumed_stats = run_collect(*resumed, &result);
  ASSERT_EQ(resumed_stats.size(), 2u);
  EXPECT_EQ(result.epochs_run, 2);
  EXPECT_EQ(result.last_epoch, 3);
  EXPECT_EQ(result.total_optimizer_steps, 9);
  for (std::size_t i = 0; i < resumed_stats.size(); ++i)
    expect_same_stats(resumed_stats[i], original_stats[i + 1]);
  expect_same_parameters(*resumed->task->model(), clone_parameters(*original->task->model()),
                         "epoch 3, resumed vs uninterrupted:");
  expect_same_adam(*resumed->task->model(), resumed->loop->optimizer(), *original->task->model(),
                   original->loop->optimizer());
  expect_same_counters(resumed->loop->counters(), original->loop->counters(),
                       "counters after epoch 3");

  // The final checkpoints of both runs hold the same counters.
  auto check_a = make_trainer(options, 1);
  auto check_b = make_trainer(options, 2);
  expect_same_counters(load_checkpoint(copy_dir.path() / "checkpoint_last", *check_a->task->model(),
                                       check_a->loop->optimizer()),
                       load_checkpoint(original_dir.path() / "checkpoint_last",
                                       *check_b->task->model(), check_b->loop->optimizer()),
                       "final checkpoint_last counters");
}

TEST_F(TrainerTest, ResumeFromAConvergedCheckpointRunsNoEpoch) {
  test::TempDir dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.checkpoint_interval = 1;
  options.checkpoint_dir = dir.path();
  auto first = make_trainer(options);
  const auto stats = run_collect(*first);
  ASSERT_EQ(stats.size(), 1u);

  // The target is exactly the checkpoint's val Dice: reached, so the loop exits at once.
  benchmark::SegmentationOptions converged = options;
  converged.epochs = 5;
  converged.target_dice = stats[0].val_dice;
  auto resumed = make_trainer(converged, 3);
  resumed->loop->resume(dir.path());
  train::LoopResult result;
  EXPECT_TRUE(run_collect(*resumed, &result).empty());
  EXPECT_EQ(result.epochs_run, 0);
  EXPECT_TRUE(result.converged);
  EXPECT_EQ(result.last_epoch, 1);
}

// checkpoint_best holds the epoch of lowest val_loss_avg even when that epoch is not a checkpoint
// epoch (issue 16, item 8): it used to be written only on checkpoint epochs, so with
// checkpoint_interval 3 and 4 epochs it held epoch 3 at best, whichever epoch was best. The best
// epoch is found here from the reported epochs.
TEST_F(TrainerTest, CheckpointBestIsTheBestEpochWhateverTheInterval) {
  test::TempDir dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 4;
  options.checkpoint_interval = 3;
  options.checkpoint_dir = dir.path();
  auto t = make_trainer(options);
  const auto stats = run_collect(*t);
  ASSERT_EQ(stats.size(), 4u);
  std::size_t best = 0;
  for (std::size_t i = 1; i < stats.size(); ++i)
    if (stats[i].val_loss_avg < stats[best].val_loss_avg) best = i;
  // With this seed the best epoch is 4, not the checkpoint epoch 3 (the case that failed).
  EXPECT_EQ(stats[best].epoch, 4)
      << "the data or seed changed: pick a case whose best epoch is not 3";
  ASSERT_TRUE(fs::exists(dir.path() / "checkpoint_best"));
  auto reader = make_trainer(options, 99);
  const TrainCounters c = load_checkpoint(dir.path() / "checkpoint_best", *reader->task->model(),
                                          reader->loop->optimizer());
  EXPECT_EQ(c.epoch, stats[best].epoch);
  EXPECT_EQ(c.val_loss_avg, stats[best].val_loss_avg);
  EXPECT_EQ(c.best_val_loss, stats[best].val_loss_avg);
}

// ---- 3. corrupt checkpoints ---------------------------------------------------------------------

// Checkpoints with distinct counters (epoch 9 in last, 7 in best) so the one loaded is visible.
class ResumeFallbackTest : public TrainerTest {
 protected:
  void SetUp() override {
    options_ = tiny_options();
    options_.checkpoint_dir = dir_.path();
    auto writer = make_trainer(options_, 11);
    last_params_ = clone_parameters(*writer->task->model());
    TrainCounters c;
    c.epoch = 9;
    c.total_optimizer_steps = 27;
    c.stop_value = 0.5;
    c.val_loss_avg = 0.25;
    c.best_val_loss = 0.125;
    save_checkpoint(last(), *writer->task->model(), writer->loop->optimizer(), c);
    auto best_writer = make_trainer(options_, 12);
    best_params_ = clone_parameters(*best_writer->task->model());
    c.epoch = 7;
    save_checkpoint(best(), *best_writer->task->model(), best_writer->loop->optimizer(), c);
  }
  fs::path last() const { return dir_.path() / "checkpoint_last"; }
  fs::path best() const { return dir_.path() / "checkpoint_best"; }
  static void truncate(const fs::path& file) {
    const std::string bytes = core::read_file(file);
    core::write_file_atomic(file, bytes.substr(0, bytes.size() / 2));
  }

  test::TempDir dir_;
  benchmark::SegmentationOptions options_;
  std::vector<at::Tensor> last_params_, best_params_;
};

TEST_F(ResumeFallbackTest, IntactLastIsPreferred) {
  auto t = make_trainer(options_);
  EXPECT_EQ(t->loop->resume(dir_.path()).epoch, 9);
  expect_same_parameters(*t->task->model(), last_params_, "resumed from checkpoint_last:");
  EXPECT_TRUE(fs::exists(last()));
  EXPECT_FALSE(fs::exists(dir_.path() / "checkpoint_last.corrupt"));
}

TEST_F(ResumeFallbackTest, TruncatedLastFallsBackToBestAndIsRenamed) {
  truncate(last());
  auto t = make_trainer(options_);
  EXPECT_EQ(t->loop->resume(dir_.path()).epoch, 7);
  EXPECT_EQ(t->loop->counters().epoch, 7);
  expect_same_parameters(*t->task->model(), best_params_, "resumed from checkpoint_best:");
  EXPECT_FALSE(fs::exists(last()));
  EXPECT_TRUE(fs::exists(dir_.path() / "checkpoint_last.corrupt"));
  EXPECT_TRUE(fs::exists(best()));
}

// A checkpoint with one flipped byte fails its digest and is treated like a truncated one
// (issue 16, item 7): set aside, and the previous good checkpoint used.
TEST_F(ResumeFallbackTest, FlippedByteInLastFallsBackToBestAndIsRenamed) {
  std::string bytes = core::read_file(last());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
  core::write_file_atomic(last(), bytes);
  auto t = make_trainer(options_);
  EXPECT_EQ(t->loop->resume(dir_.path()).epoch, 7);
  expect_same_parameters(*t->task->model(), best_params_, "resumed from checkpoint_best:");
  EXPECT_TRUE(fs::exists(dir_.path() / "checkpoint_last.corrupt"));
}

// A restart whose model does not fit the checkpoints (another unet_base_channels) fails naming
// the mismatch and leaves both checkpoints as they are (issue 16, item 8): they used to be
// renamed *.corrupt, so the run could never resume.
TEST_F(ResumeFallbackTest, ModelThatDoesNotFitRenamesNothing) {
  const std::string last_bytes = core::read_file(last());
  const std::string best_bytes = core::read_file(best());
  torch::manual_seed(13);
  model::UNetOptions wide;
  wide.in_channels = 3;
  wide.n_classes = kClasses;
  wide.layers = 1;
  wide.base_channels = 8;
  wide.group_norm_groups = 2;
  benchmark::SegmentationTraining t =
      benchmark::make_segmentation_training(model::UNet3d(wide), options_, *data_.train, *data_.val,
                                            c10::Device(c10::kCPU), world(), single_grid());
  std::string message;
  try {
    t.loop->resume(dir_.path());
  } catch (const core::FileError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("in this model"), std::string::npos) << message;
  EXPECT_NE(message.find("the checkpoints are unchanged"), std::string::npos) << message;
  EXPECT_EQ(core::read_file(last()), last_bytes);
  EXPECT_EQ(core::read_file(best()), best_bytes);
  EXPECT_FALSE(fs::exists(dir_.path() / "checkpoint_last.corrupt"));
  EXPECT_FALSE(fs::exists(dir_.path() / "checkpoint_best.corrupt"));
}

TEST_F(ResumeFallbackTest, MissingLastFallsBackToBest) {
  fs::remove(last());
  auto t = make_trainer(options_);
  EXPECT_EQ(t->loop->resume(dir_.path()).epoch, 7);
}

TEST_F(ResumeFallbackTest, NoUsableCheckpointThrowsFileErrorNamingTheDirectory) {
  truncate(last());
  core::write_file_atomic(best(), "not a checkpoint");
  auto t = make_trainer(options_);
  std::string message;
  try {
    t->loop->resume(dir_.path());
  } catch (const core::FileError& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "no core::FileError thrown";
  EXPECT_NE(message.find(dir_.path().string()), std::string::npos) << message;
  EXPECT_TRUE(fs::exists(dir_.path() / "checkpoint_last.corrupt"));
  EXPECT_TRUE(fs::exists(dir_.path() / "checkpoint_best.corrupt"));

  test::TempDir empty;
  std::string none = "(no core::FileError thrown)";
  try {
    t->loop->resume(empty.path());
  } catch (const core::FileError& e) {
    none = e.what();
  }
  EXPECT_NE(none.find(empty.path().string()), std::string::npos) << none;
}

// ---- 4. setup checks and divergence -------------------------------------------------------------

TEST_F(TrainerTest, GlobalBatchLargerThanEitherSplitIsRejected) {
  benchmark::SegmentationOptions options = tiny_options();
  options.local_batch_size = kValVolumes;  // == the validation set: allowed
  EXPECT_NO_THROW(make_trainer(options));

  options.local_batch_size = kValVolumes + 1;
  const std::string val_msg = error_of([&] { make_trainer(options); });
  EXPECT_NE(val_msg.find("global validation batch 3"), std::string::npos) << val_msg;
  EXPECT_NE(val_msg.find("the validation set (2 examples)"), std::string::npos) << val_msg;
  // The training set is big enough, so the message does not send the user to it.
  EXPECT_EQ(val_msg.find("training set"), std::string::npos) << val_msg;

  options.local_batch_size = kTrainVolumes + 1;
  const std::string train_msg = error_of([&] { make_trainer(options); });
  EXPECT_NE(train_msg.find("global batch 7"), std::string::npos) << train_msg;
  EXPECT_NE(train_msg.find("the training set (" + std::to_string(kTrainVolumes) + " examples)"),
            std::string::npos)
      << train_msg;
}

// A NaN parameter makes every loss NaN: run() must stop after the first epoch's validation, before
// reporting the epoch or writing a checkpoint of the broken model.
TEST_F(TrainerTest, NonFiniteLossStopsTrainingAsDiverged) {
  test::TempDir dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 3;
  options.checkpoint_interval = 1;
  options.checkpoint_dir = dir.path();
  auto t = make_trainer(options);
  {
    at::NoGradGuard no_grad;
    t->task->model()->parameters().back().fill_(std::numeric_limits<float>::quiet_NaN());
  }
  int reported = 0;
  std::string message;
  try {
    t->loop->run([&](const train::LoopEpoch&) { ++reported; });
  } catch (const core::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("diverged"), std::string::npos) << "message: " << message;
  EXPECT_NE(message.find("epoch 1"), std::string::npos) << message;
  EXPECT_EQ(reported, 0);
  EXPECT_EQ(t->loop->counters().epoch, 0);
  EXPECT_FALSE(fs::exists(dir.path() / "checkpoint_last"));
}

// The same through the optimiser: an absurd learning rate blows the parameters up on the first
// step (Adam's first update is lr x sign(grad)), and the losses overflow to inf/NaN.
TEST_F(TrainerTest, AbsurdLearningRateDiverges) {
  benchmark::SegmentationOptions options = tiny_options();
  options.learning_rate = 1e30;
  options.min_learning_rate = 1e30;
  auto t = make_trainer(options);
  const std::string message = error_of([&] { run_collect(*t); });
  EXPECT_NE(message.find("diverged"), std::string::npos) << "message: " << message;
}

// ---- 5. channels-last 3-D (memory_format) ------------------------------------------------------

// The same training in ChannelsLast3d: the same epochs up to kernel rounding, and the weights stay
// channels-last through the warm-up's snapshot and restore.
TEST_F(TrainerTest, ChannelsLastTrainsLikeContiguousAndStaysChannelsLast) {
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 2;
  auto plain = make_trainer(options);
  plain->loop->warmup();
  const auto reference = run_collect(*plain);
  options.channels_last = true;
  auto cl = make_trainer(options);
  cl->loop->warmup();
  const auto stats = run_collect(*cl);
  ASSERT_EQ(stats.size(), reference.size());
  for (std::size_t i = 0; i < stats.size(); ++i) {
    EXPECT_NEAR(stats[i].epoch_loss, reference[i].epoch_loss,
                1e-4 * std::abs(reference[i].epoch_loss))
        << i;
    EXPECT_NEAR(stats[i].val_dice, reference[i].val_dice, 1e-4) << i;
  }
  int five_d = 0;
  for (const auto& p : cl->task->model()->named_parameters()) {
    if (p.value().dim() != 5) continue;
    ++five_d;
    EXPECT_TRUE(p.value().is_contiguous(at::MemoryFormat::ChannelsLast3d)) << p.key();
  }
  EXPECT_GT(five_d, 0);
}

// async_save: the checkpoints are the same files as with synchronous saving, on disk when run()
// returns, and a resume from them continues alike.
TEST_F(TrainerTest, AsyncSaveWritesTheSameCheckpoints) {
  test::TempDir sync_dir, async_dir;
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 2;
  options.checkpoint_interval = 1;
  options.checkpoint_dir = sync_dir.path();
  auto sync = make_trainer(options);
  run_collect(*sync);
  options.checkpoint_dir = async_dir.path();
  options.async_save = true;
  auto async = make_trainer(options);
  run_collect(*async);
  // Not byte-compared: the archives name their TorchScript classes with a process-wide counter.
  for (const char* name : {"checkpoint_last", "checkpoint_best"}) {
    ASSERT_TRUE(fs::exists(async_dir.path() / name)) << name;
    auto from_sync = make_trainer(options, 99), from_async = make_trainer(options, 98);
    const TrainCounters a = load_checkpoint(async_dir.path() / name, *from_async->task->model(),
                                            from_async->loop->optimizer());
    const TrainCounters e = load_checkpoint(sync_dir.path() / name, *from_sync->task->model(),
                                            from_sync->loop->optimizer());
    expect_same_counters(a, e, name);
    expect_same_parameters(*from_async->task->model(), clone_parameters(*from_sync->task->model()),
                           name);
    expect_same_adam(*from_async->task->model(), from_async->loop->optimizer(),
                     *from_sync->task->model(), from_sync->loop->optimizer());
  }
}

// ---- 6. no host reads in the hot path (issue 14)
// -------------------------------------------------

// Counts item() (aten::_local_scalar_dense, what every host read of a device scalar goes through)
// on this thread while alive. On a GPU each would be a device synchronisation.
class HostReadCounter {
 public:
  HostReadCounter() {
    count() = 0;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start).needsInputs(false));
  }
  ~HostReadCounter() { at::removeCallback(handle_); }
  int reads() const { return count(); }

 private:
  static int& count() {
    static thread_local int n = 0;
    return n;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    if (std::string(fn.name()) == "aten::_local_scalar_dense") ++count();
    return nullptr;
  }
  at::CallbackHandle handle_;
};

TEST_F(TrainerTest, HotPathCounterSeesAHostRead) {
  HostReadCounter counter;
  (void)at::ones({}).item<double>();
  EXPECT_EQ(counter.reads(), 1);
  // LibTorch 1.13's clip_grad_norm_ returns total_norm.item(): one read a step, why the loop
  // clips with train::clip_grad_norm instead.
  auto model = tiny_model();
  for (at::Tensor& p : model->parameters()) p.mutable_grad() = at::ones_like(p);
  torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
  EXPECT_EQ(counter.reads(), 2);
}

// Whole epochs of the ScaFFold task (forward, loss, backward, clip, Adam, validation, the epoch's
// sums) read no device value on the host, step by step: the only transfers are the epoch's sums,
// copied once (a copy, not an item(), invisible to this count on the CPU; the source check in
// test_hot_path.cpp covers it).
TEST_F(TrainerTest, HotPathTrainingEpochsReadNoDeviceScalarOnTheHost) {
  benchmark::SegmentationOptions options = tiny_options();
  options.epochs = 2;
  ASSERT_GT(options.grad_clip_norm, 0.0);  // the clip is part of every step
  auto t = make_trainer(options);
  t->loop->warmup();
  HostReadCounter counter;
  train::LoopResult result;
  const auto stats = run_collect(*t, &result);
  EXPECT_EQ(counter.reads(), 0) << "host reads of device scalars during "
                                << result.total_optimizer_steps << " training steps and "
                                << stats.size() << " validation passes";
  EXPECT_EQ(stats.size(), 2u);
  EXPECT_EQ(result.step_times_s.size(), static_cast<std::size_t>(result.total_optimizer_steps));
  for (double s : result.step_times_s) EXPECT_GT(s, 0.0);
}

}  // namespace
}  // namespace scaffold::train
