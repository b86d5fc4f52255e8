// The segmentation's epoch metrics against their definitions (issue 16): four epochs of a tiny
// U-Net through the SegmentationTask on the shared loop, and the same four epochs replayed here
// with code written from the definitions in docs/benchmark.md ('Training') alone — the CE class
// weights, class-weighted CE + (1 - soft foreground Dice), the hard Dice of validation, Adam with
// clipping at 1.0 and CosineAnnealingWarmRestarts stepped once per epoch — in float64, on the
// volumes as generated here (not as the dataset reads them). Each epoch's overall_loss, epoch_loss,
// train_dice, val_loss_avg, val_dice and next_lr must match, and so must the parameters after the
// epochs: a replay at another learning rate ends elsewhere, so that checks the LR each epoch
// used. fp32 without autocast and one thread, so the two differ by rounding only. What the
// library provides and is trusted here: the model's forward, torch's Adam and clip_grad_norm_,
// and the epoch order of the training sampler (data::training_indices, whose shuffle, padding
// and striding tests/unit/data/test_sampler.cpp covers). The hard and soft Dice, the weighted
// and unweighted CE and the epochs' LRs differ by more than the tolerance (checked), so a metric
// computed by another of these definitions fails.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "core/npy.hpp"
#include "data/sampler.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/model/unet.hpp"
#include "workloads/scaffold/segmentation_task.hpp"

namespace scaffold::train {
namespace {

using dataset::DatasetPaths;
using dataset::Split;

constexpr int64_t kSide = 8;
constexpr int kTrainVolumes = 5;  // batch 2: batches of 2, 2 and 1 (the ragged one weighs 1)
constexpr int kValVolumes = 3;    // batches of 2 and 1
constexpr int64_t kClasses = 3;
constexpr int64_t kBatch = 2;
constexpr int kEpochs = 4;
constexpr double kLr0 = 1e-2, kLrMin = 1e-3;
constexpr int64_t kT0 = 2,
                  kTMult = 2;  // restarts after epochs 2 and 6: epochs 1..4 use 4 distinct LRs
constexpr uint64_t kModelSeed = 21, kSamplerSeed = 9;
constexpr double kPi = 3.14159265358979323846;

class Environment : public ::testing::Environment {
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
    ::testing::AddGlobalTestEnvironment(new Environment);

// One volume: a ball of class 1 and a box of class 2 (drawn over it), colours that separate the
// classes only partly (noise on every channel), so the model is neither perfect nor hopeless and
// the hard and soft Dice differ.
struct Volume {
  at::Tensor image;  // (3, D, H, W) float32
  at::Tensor mask;   // (D, H, W) int64
};

Volume make_volume(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.3f, 0.3f);
  const auto n = static_cast<std::size_t>(kSide * kSide * kSide);
  std::vector<int64_t> mask(n, 0);
  const double cz = 2 + rng() % 4, cy = 2 + rng() % 4, cx = 2 + rng() % 4,
               r = 1.5 + (rng() % 3) * 0.5;
  int64_t lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = static_cast<int64_t>(rng() % 5);
    hi[a] = lo[a] + 2 + static_cast<int64_t>(rng() % 2);
  }
  for (int64_t z = 0; z < kSide; ++z)
    for (int64_t y = 0; y < kSide; ++y)
      for (int64_t x = 0; x < kSide; ++x) {
        const auto i = static_cast<std::size_t>((z * kSide + y) * kSide + x);
        if ((z - cz) * (z - cz) + (y - cy) * (y - cy) + (x - cx) * (x - cx) <= r * r) mask[i] = 1;
        if (z >= lo[0] && z < hi[0] && y >= lo[1] && y < hi[1] && x >= lo[2] && x < hi[2])
          mask[i] = 2;
      }
  std::vector<float> image(3 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      image[c * n + i] = (mask[i] == static_cast<int64_t>(c) ? 0.6f : 0.0f) + noise(rng);
  Volume v;
  v.image = at::from_blob(image.data(), {3, kSide, kSide, kSide}, at::kFloat).clone();
  v.mask = at::from_blob(mask.data(), {kSide, kSide, kSide}, at::kLong).clone();
  return v;
}

// The volumes, and the same written as a dataset folder for the Trainer.
struct Data {
  Data() {
    for (Split s : {Split::Training, Split::Validation}) {
      core::create_directories(paths.volumes_dir(s));
      core::create_directories(paths.masks_dir(s));
    }
    for (int i = 0; i < kTrainVolumes + kValVolumes; ++i) {
      const bool is_val = i >= kTrainVolumes;
      const int index = is_val ? i - kTrainVolumes : i;
      Volume v = make_volume(static_cast<unsigned>(300 + 7 * i));
      std::vector<uint16_t> mask(static_cast<std::size_t>(v.mask.numel()));
      for (std::size_t k = 0; k < mask.size(); ++k)
        mask[k] = static_cast<uint16_t>(v.mask.data_ptr<int64_t>()[k]);
      const Split s = is_val ? Split::Validation : Split::Training;
      core::write_npy(paths.volume_file(s, index, 0), core::DType::Float32,
                      {3, kSide, kSide, kSide}, v.image.data_ptr<float>());
      core::write_npy(paths.mask_file(s, index, 0), core::DType::UInt16, {kSide, kSide, kSide},
                      mask.data());
      (is_val ? val_volumes : train_volumes).push_back(std::move(v));
    }
    train = std::make_unique<dataset::FractalDataset>(paths, Split::Training,
                                                      dataset::ShardLayout(), 0, kSide);
    val = std::make_unique<dataset::FractalDataset>(paths, Split::Validation,
                                                    dataset::ShardLayout(), 0, kSide);
  }
  test::TempDir dir;
  DatasetPaths paths{dir.path()};
  std::vector<Volume> train_volumes, val_volumes;  // index i = id "i" (ids < 10 sort as numbers)
  std::unique_ptr<dataset::FractalDataset> train, val;
};

model::UNet3d tiny_model() {
  torch::manual_seed(kModelSeed);
  model::UNetOptions o;
  o.in_channels = 3;
  o.n_classes = kClasses;
  o.layers = 1;
  o.base_channels = 4;
  o.group_norm_groups = 2;
  return model::UNet3d(o);
}

// ---- the definitions, written from docs/benchmark.md ------------------------------------------

// CE class weights: k = min(max(ceil(n * fraction), 1), n) masks at linspace(0, n-1, k)
// truncated; w[0] = T / bg, w[c >= 1] = T / fg.
std::vector<double> spec_class_weights(const std::vector<Volume>& train, double fraction) {
  const auto n = static_cast<int64_t>(train.size());
  const int64_t k =
      std::min(std::max<int64_t>(static_cast<int64_t>(std::ceil(n * fraction)), 1), n);
  double bg = 0, fg = 0;
  for (int64_t j = 0; j < k; ++j) {
    const double x =
        k == 1 ? 0.0
               : static_cast<double>(j) * static_cast<double>(n - 1) / static_cast<double>(k - 1);
    const at::Tensor& m = train[static_cast<std::size_t>(static_cast<int64_t>(x))].mask;
    bg += static_cast<double>((m == 0).sum().item<int64_t>());
    fg += static_cast<double>((m > 0).sum().item<int64_t>());
  }
  std::vector<double> w(static_cast<std::size_t>(kClasses), (bg + fg) / fg);
  w[0] = (bg + fg) / bg;
  return w;
}

// Dice of (B, K, D, H, W) probabilities or one-hot predictions against one-hot
// labels, per sample and class: I = 2 sum p g, S = sum p + sum g, S := I where S == 0, (I + 1e-6) /
// (S + 1e-6).
at::Tensor spec_dice(const at::Tensor& p, const at::Tensor& g) {
  const at::Tensor i = 2 * (p * g).sum({2, 3, 4});
  at::Tensor s = p.sum({2, 3, 4}) + g.sum({2, 3, 4});
  s = at::where(s == 0, i, s);
  return (i + 1e-6) / (s + 1e-6);  // (B, K)
}

struct SpecBatch {
  at::Tensor loss;           // () float64, differentiable: CE + 1 - mean soft foreground Dice
  double soft_dice_sum = 0;  // sum over the batch of each sample's mean soft foreground Dice
  double hard_dice_sum = 0;  // the same for the hard Dice
};

SpecBatch spec_batch(const at::Tensor& logits, const at::Tensor& mask, const at::Tensor& weights) {
  const at::Tensor log_p = at::log_softmax(logits.to(at::kDouble), 1);
  const at::Tensor g = at::one_hot(mask, kClasses).permute({0, 4, 1, 2, 3}).to(at::kDouble);
  const at::Tensor w = weights.index({mask});  // (B, D, H, W): w[y] per voxel
  const at::Tensor ce = (w * -(log_p * g).sum(1)).sum() / w.sum();
  const at::Tensor soft = spec_dice(log_p.exp(), g).slice(1, 1).mean(1);  // (B), classes 1..K-1
  const at::Tensor pred =
      at::one_hot(logits.argmax(1), kClasses).permute({0, 4, 1, 2, 3}).to(at::kDouble);
  const at::Tensor hard = spec_dice(pred, g).slice(1, 1).mean(1);
  SpecBatch b;
  b.loss = ce + 1.0 - soft.mean();
  b.soft_dice_sum = soft.sum().item<double>();
  b.hard_dice_sum = hard.sum().item<double>();
  return b;
}

// CosineAnnealingWarmRestarts: the LR of 1-based epoch e, from the epochs completed before it.
double spec_lr(int64_t epoch) {
  int64_t t_cur = epoch - 1, t_i = kT0;
  while (t_cur >= t_i) {
    t_cur -= t_i;
    t_i *= kTMult;
  }
  return kLrMin +
         (kLr0 - kLrMin) *
             (1.0 + std::cos(kPi * static_cast<double>(t_cur) / static_cast<double>(t_i))) / 2.0;
}

at::Tensor stack_batch(const std::vector<Volume>& volumes, const std::vector<int64_t>& idx,
                       bool images) {
  std::vector<at::Tensor> parts;
  for (int64_t i : idx)
    parts.push_back(images ? volumes[static_cast<std::size_t>(i)].image
                           : volumes[static_cast<std::size_t>(i)].mask);
  return at::stack(parts);
}

struct SpecEpoch {
  double epoch_loss = 0, overall_loss = 0, train_dice = 0, val_loss_avg = 0, val_dice = 0,
         val_soft_dice = 0;
  double lr = 0;
};

// ---- the test ---------------------------------------------------------------------------------

TEST(EpochMetrics, EachEpochMatchesTheSpecsDefinitionsRecomputedFromTheModelsOutputs) {
  Data data;
  benchmark::SegmentationOptions o;
  o.local_batch_size = kBatch;
  o.epochs = kEpochs;
  o.target_dice = 2.0;  // never reached
  o.warmup_batches = 0;
  o.optimizer = "ADAM";
  o.learning_rate = kLr0;
  o.min_learning_rate = kLrMin;
  o.T_0 = kT0;
  o.T_mult = kTMult;
  o.amp_bf16 = false;
  o.grad_clip_norm = 1.0;
  o.seed = kSamplerSeed;
  o.n_classes = kClasses;
  o.ce_weight_sample_fraction = 0.5;  // 3 of the 5 training masks
  o.loader_workers = 0;
  static const dist::ProcessGrid grid(1, 0, {1, 1, 1}, {2, 3, 4});
  benchmark::SegmentationTraining trainer = benchmark::make_segmentation_training(
      tiny_model(), o, *data.train, *data.val, c10::Device(c10::kCPU),
      Environment::runtime()->world(), grid);
  trainer.task->estimate_class_weights(Environment::runtime()->world());
  std::vector<benchmark::EpochStats> got;
  trainer.loop->run([&](const train::LoopEpoch& loop_epoch) {
    const benchmark::EpochStats s = benchmark::epoch_stats(loop_epoch);
    got.push_back(s);
  });
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kEpochs));

  // The replay.
  const std::vector<double> w = spec_class_weights(data.train_volumes, o.ce_weight_sample_fraction);
  ASSERT_EQ(trainer.task->class_weights().size(), w.size());
  for (std::size_t c = 0; c < w.size(); ++c)
    EXPECT_NEAR(trainer.task->class_weights()[c], w[c], 1e-6 * w[c]) << "w" << c;
  ASSERT_GT(w[1], 2 * w[0])
      << "the weights must matter for this test to tell weighted from plain CE";
  const at::Tensor weights = at::tensor(w, at::kDouble);
  model::UNet3d model = tiny_model();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kLr0));
  std::vector<SpecEpoch> want;
  for (int64_t e = 1; e <= kEpochs; ++e) {
    SpecEpoch s;
    s.lr = spec_lr(e);
    for (auto& group : adam.param_groups()) group.options().set_lr(s.lr);
    const auto order = data::training_indices(kTrainVolumes, 1, 0, kSamplerSeed, e);
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kTrainVolumes));
    for (std::size_t b = 0; b < order.size(); b += kBatch) {
      const std::vector<int64_t> idx(
          order.begin() + static_cast<std::ptrdiff_t>(b),
          order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + kBatch)));
      const SpecBatch r = spec_batch(model->forward(stack_batch(data.train_volumes, idx, true)),
                                     stack_batch(data.train_volumes, idx, false), weights);
      s.epoch_loss += r.loss.item<double>() * static_cast<double>(idx.size());
      s.train_dice += r.soft_dice_sum;
      adam.zero_grad();
      r.loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      adam.step();
    }
    s.overall_loss = s.epoch_loss / kTrainVolumes;
    s.train_dice /= kTrainVolumes;
    at::NoGradGuard no_grad;
    double val_loss = 0;
    for (int64_t b = 0; b < kValVolumes; b += kBatch) {
      std::vector<int64_t> idx;
      for (int64_t i = b; i < std::min<int64_t>(kValVolumes, b + kBatch); ++i) idx.push_back(i);
      const SpecBatch r = spec_batch(model->forward(stack_batch(data.val_volumes, idx, true)),
                                     stack_batch(data.val_volumes, idx, false), weights);
      val_loss += r.loss.item<double>() * static_cast<double>(idx.size());
      s.val_dice += r.hard_dice_sum;
      s.val_soft_dice += r.soft_dice_sum;
    }
    s.val_loss_avg = val_loss / kValVolumes;
    s.val_dice /= kValVolumes;
    s.val_soft_dice /= kValVolumes;
    want.push_back(s);
  }

  // Relative 1e-5: float32 (the trainer) against float64 (here) over a few steps.
  const auto near = [](double a, double b) {
    return std::abs(a - b) <= 1e-5 * std::max(std::abs(b), 1e-3);
  };
  for (int e = 0; e < kEpochs; ++e) {
    const benchmark::EpochStats& g = got[static_cast<std::size_t>(e)];
    const SpecEpoch& s = want[static_cast<std::size_t>(e)];
    const std::string at_epoch = "epoch " + std::to_string(e + 1);
    EXPECT_EQ(g.epoch, e + 1);
    EXPECT_PRED2(near, g.epoch_loss, s.epoch_loss) << at_epoch;
    EXPECT_PRED2(near, g.overall_loss, s.overall_loss) << at_epoch;
    EXPECT_PRED2(near, g.train_dice, s.train_dice) << at_epoch;
    EXPECT_PRED2(near, g.val_loss_avg, s.val_loss_avg) << at_epoch;
    EXPECT_PRED2(near, g.val_loss_epoch, s.val_loss_avg * kValVolumes) << at_epoch;
    EXPECT_PRED2(near, g.val_dice, s.val_dice) << at_epoch;
    EXPECT_NEAR(g.next_lr, spec_lr(e + 2), 1e-15) << at_epoch << ": the LR of the next epoch";
    EXPECT_EQ(g.optimizer_steps, 3) << at_epoch;
    // The checks above can tell the definitions apart: hard and soft Dice differ by more than the
    // tolerance, as do the epochs' learning rates.
    EXPECT_GT(std::abs(s.val_dice - s.val_soft_dice), 1e-3) << at_epoch;
  }
  EXPECT_GT(std::abs(spec_lr(4) - spec_lr(2)), 1e-4) << "T_mult must show in epoch 4's LR";

  // The parameters after four epochs: the same steps at the same learning rates.
  const auto a = trainer.task->model()->named_parameters();
  const auto b = model->parameters();
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  std::string worst_name;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d =
        (a[i].value().to(at::kDouble) - b[i].detach().to(at::kDouble)).abs().max().item<double>();
    if (d > worst) worst = d, worst_name = a[i].key();
  }
  // Adam moves each parameter by about the LR per step; a replay at another LR in any epoch is off
  // by ~(difference x 3 steps) >= 1e-3 somewhere, far above the rounding seen (~1e-6).
  EXPECT_LE(worst, 1e-4) << "max-abs parameter difference, at " << worst_name;
}

}  // namespace
}  // namespace scaffold::train
