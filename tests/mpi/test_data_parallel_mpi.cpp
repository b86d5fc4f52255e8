// Data parallelism with the benchmark's loss: class-weighted CE (the weights estimated from the
// masks, docs/benchmark.md) normalised per replica (each replica divides by its own samples'
// weight sum) plus 1 - soft Dice, and gradients averaged over the replicas (docs/distributed.md).
// What is equal: R replicas with batch 1 each (optionally each split in space) take the step of
// one process that averages the R per-replica losses, up to summation order; and an epoch's steps
// take the same samples at every replica count when the global batch is fixed
// (DistributedSampler's order). What is not: one process with batch R normalises the CE by the
// weight sum of all R samples, a different loss whenever the replicas' samples carry different
// weight sums; its steps differ (checked, so that these tests can tell the two apart). Gradients
// are reduced in buckets started during backward. Run under mpiexec -n 2 and 4.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "core/npy.hpp"
#include "data/sampler.hpp"
#include "dist/grad_reducer.hpp"
#include "nn/memory_format.hpp"
#include "spatial_test_util.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/loss.hpp"
#include "workloads/scaffold/model/unet.hpp"
#include "workloads/scaffold/segmentation_task.hpp"

namespace scaffold {
namespace {

using test::world;

at::Tensor image_of(int index) {
  torch::manual_seed(2000 + index);
  return at::randn({1, 3, 16, 16, 16});
}

// Background with a box of class 1 and one of class 2 whose sizes change with the sample, so the
// samples carry different CE weight sums (sum over voxels of w[y]), as fractal volumes do.
at::Tensor labels_of(int index) {
  at::Tensor y = at::zeros({1, 16, 16, 16}, at::TensorOptions().dtype(at::kLong));
  const int64_t a = 2 + index % 5, b = 2 + (3 * index) % 4;
  y.narrow(1, 1, a).narrow(2, 2, a).narrow(3, 3, a).fill_(1);
  y.narrow(1, 9, b).narrow(2, 8, b).narrow(3, 4, b).fill_(2);
  return y;
}

// The benchmark's CE weights from the masks of `samples` samples (T / bg, T / fg; see
// docs/benchmark.md).
at::Tensor class_weights_of(int samples) {
  std::vector<int64_t> counts(3, 0);
  for (int i = 0; i < samples; ++i) {
    const auto c = train::class_counts(labels_of(i), 3);
    for (std::size_t k = 0; k < counts.size(); ++k) counts[k] += c[k];
  }
  return train::ce_class_weights(counts);
}

std::vector<at::Tensor> parameters_after_step(model::UNet3d& net) {
  std::vector<at::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

// channels_last: the distributed model trains ChannelsLast3d (weights, input, gradients), the
// reference stays NCDHW; broadcasts and all-reduces then carry channels-last tensors.
void run_layout(const std::array<int, 3>& shards, bool channels_last = false) {
  const int spatial = shards[0] * shards[1] * shards[2];
  ASSERT_EQ(world().size() % spatial, 0);
  SCOPED_TRACE("shards [" + std::to_string(shards[0]) + "," + std::to_string(shards[1]) + "," +
               std::to_string(shards[2]) + "]");
  test::SpatialSetup s(shards);
  const int replicas = s.grid.replicas();
  constexpr double kLr = 0.1;

  // Reference: one process, the whole batch of R samples.
  torch::manual_seed(9);
  model::UNet3d reference(test::small_unet(3));
  std::vector<at::Tensor> initial;
  for (const auto& p : reference->parameters()) initial.push_back(p.detach().clone());
  std::vector<at::Tensor> images, labels;
  for (int r = 0; r < replicas; ++r) {
    images.push_back(image_of(r));
    labels.push_back(labels_of(r));
  }
  const at::Tensor weights = class_weights_of(replicas);
  ASSERT_GT(weights[1].item<double>(), 10 * weights[0].item<double>()) << "the weights must matter";
  // The benchmark's loss across replicas: the mean of the R per-replica losses.
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(kLr));
  ref_opt.zero_grad();
  at::Tensor mean_loss = at::zeros({});
  for (int r = 0; r < replicas; ++r)
    mean_loss = mean_loss +
                train::segmentation_loss(reference->forward(images[r]), labels[r], weights).loss;
  (mean_loss / replicas).backward();
  std::vector<at::Tensor> ref_grads;
  for (const auto& p : reference->parameters()) ref_grads.push_back(p.grad().clone());
  ref_opt.step();
  const auto ref_after = parameters_after_step(reference);
  // Not the same: one process with batch R (CE over the weight sum of all R samples).
  if (replicas > 1) {
    torch::manual_seed(9);
    model::UNet3d whole(test::small_unet(3));
    train::segmentation_loss(whole->forward(at::cat(images)), at::cat(labels), weights)
        .loss.backward();
    double largest = 0;
    const auto wp = whole->parameters();
    for (std::size_t i = 0; i < wp.size(); ++i)
      largest = std::max(largest, test::relative_error(wp[i].grad(), ref_grads[i]));
    EXPECT_GT(largest, 1e-2)
        << "the batch-R loss should give another gradient than the replicas' mean";
  }

  // Distributed: this rank's shard of sample `replica`, gradients summed over the world / R.
  model::UNetOptions o = test::small_unet(3);
  if (spatial > 1) o.spatial = s.ctx;
  torch::manual_seed(9);
  model::UNet3d net(o);
  if (channels_last) nn::set_memory_format(*net, at::MemoryFormat::ChannelsLast3d);
  train::SpatialSum sum;
  if (spatial > 1) {
    const std::shared_ptr<const model::SpatialContext> ctx = s.ctx;
    sum = [ctx](const at::Tensor& t) { return model::spatial_sum(t, ctx); };
  }
  auto world_tensors = dist::make_mpi_tensor_comm(world());
  // Small buckets, so several all-reduces are in flight during backward.
  dist::GradientReducer reducer(net->parameters(), *world_tensors, 1.0 / replicas, 16 << 10);
  EXPECT_GT(reducer.bucket_count(), 3u);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(kLr));
  opt.zero_grad();
  const int r = s.grid.replica();
  at::Tensor image = image_of(r), mask = labels_of(r);
  if (spatial > 1) {
    image = test::local_slice(image, *s.ctx);
    mask = test::local_slice(mask, *s.ctx, 1);
  }
  if (channels_last) image = image.contiguous(at::MemoryFormat::ChannelsLast3d);
  reducer.prepare();
  train::segmentation_loss(net->forward(image), mask, weights, sum).loss.backward();
  reducer.finish();
  const auto params = net->parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_LT(test::relative_error(params[i].grad(), ref_grads[i]), 1e-4) << "gradient " << i;
  opt.step();
  const auto after = parameters_after_step(net);
  for (std::size_t i = 0; i < after.size(); ++i) {
    // Relative to the step taken, which is what a wrong reduction would change.
    const double step = (ref_after[i] - initial[i]).abs().max().item<double>();
    const double diff = (after[i] - ref_after[i]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * step + 1e-7) << "parameter " << i;
  }
  // Every rank holds the same parameters afterwards (bitwise: same reduced gradients).
  for (std::size_t i = 0; i < after.size(); ++i) {
    const at::Tensor summed = test::group_sum(*world_tensors, after[i]);
    EXPECT_TRUE(summed.equal(after[i] * world().size()) ||
                test::relative_error(summed / world().size(), after[i]) < 1e-7);
  }
}

// Accumulation with a parameter the armed (last) backward does not reach, as a pipeline's model
// chunk whose last backward came earlier: it contributes the gradient it holds from the unarmed
// pass, not zeros. Rank r's loss is (r + 1) (a . 1 + b . 1) in the first pass and (r + 1) a . 1 in
// the armed one, so the reduced gradients (scale 1 / P) are a: 2 mean(r + 1), b: mean(r + 1).
TEST(DataParallel, AParameterTheLastBackwardMissesKeepsItsAccumulatedGradient) {
  auto comm = dist::make_mpi_tensor_comm(world());
  const at::Tensor a = at::zeros({5}).requires_grad_(true), b = at::zeros({3}).requires_grad_(true);
  // Buckets of one parameter each (4 bytes): b's bucket is launched only by finish().
  dist::GradientReducer reducer({a, b}, *comm, 1.0 / world().size(), 4);
  const double w = world().rank() + 1.0;
  ((a.sum() + b.sum()) * w).backward();  // unarmed: accumulates only
  reducer.prepare(/*include_accumulated=*/true);
  (a.sum() * w).backward();
  reducer.finish();
  const double mean_w = (world().size() + 1) / 2.0;
  EXPECT_TRUE(at::allclose(a.grad(), at::full({5}, 2 * mean_w), 1e-6, 1e-6)) << a.grad();
  EXPECT_TRUE(at::allclose(b.grad(), at::full({3}, mean_w), 1e-6, 1e-6))
      << b.grad() << ": the gradient of the unarmed pass was lost";
}

// The trainer's end-of-epoch check: identical parameters pass; one rank's drift fails everywhere.
TEST(DataParallel, ParameterCheckCatchesARankThatDrifted) {
  torch::manual_seed(4);
  std::vector<at::Tensor> params{at::randn({10, 3}), at::randn({7})};
  bool warned = false;
  EXPECT_NO_THROW(train::check_same_parameters(world(), params, "in the test", &warned));
  EXPECT_FALSE(warned);
  if (world().rank() == world().size() - 1) params[1][3].add_(1e-2);
  try {
    train::check_same_parameters(world(), params, "in the test", &warned);
    FAIL() << "rank " << world().rank() << " did not see the drift";
  } catch (const dist::AgreedError& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks' parameters differ in the test"),
              std::string::npos)
        << e.what();
  }
}

TEST(DataParallel, ReplicasWithBatchOneEqualOneProcessWithTheWholeBatch) {
  run_layout({1, 1, 1});
}

TEST(DataParallel, ChannelsLast3dReplicasEqualOneContiguousProcess) {
  run_layout({1, 1, 1}, /*channels_last=*/true);
}

// Broadcast and all-reduce take any dense layout (the same on every rank): a channels-last
// tensor arrives with its values where they belong.
TEST(DataParallel, ChannelsLastTensorsBroadcastAndAllReduce) {
  auto comm = dist::make_mpi_tensor_comm(world());
  const auto make = [](int seed) {
    torch::manual_seed(seed);
    return at::randn({4, 3, 3, 3, 3});
  };
  at::Tensor mine = make(100 + world().rank()).contiguous(at::MemoryFormat::ChannelsLast3d);
  ASSERT_FALSE(mine.is_contiguous());
  comm->broadcast(mine, 0);
  EXPECT_TRUE(mine.is_contiguous(at::MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(at::equal(mine, make(100)));
  at::Tensor summed = make(200 + world().rank()).contiguous(at::MemoryFormat::ChannelsLast3d);
  comm->allreduce_sum(summed)->wait();
  at::Tensor expected = at::zeros({4, 3, 3, 3, 3});
  for (int r = 0; r < world().size(); ++r) expected += make(200 + r);
  EXPECT_LT(test::relative_error(summed, expected), 1e-6);
}

// All-gather and reduce-scatter against their definitions, each rank's blocks built here from
// its rank: float32, float64 and int64 blocks of 1, 5 and 1000 elements; sizes that do not fit
// the group are refused.
TEST(DataParallel, AllGatherAndReduceScatterMatchTheirDefinitions) {
  auto comm = dist::make_mpi_tensor_comm(world());
  const int p = world().size(), me = world().rank();
  const auto block = [](int rank, int64_t n, at::ScalarType type) {
    return (at::arange(n, at::kDouble) * 0.5 + 1000.0 * rank + 7.0).to(type);
  };
  for (const at::ScalarType type : {at::kFloat, at::kDouble, at::kLong})
    for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{1000}}) {
      const std::string what = std::string(c10::toString(type)) + " n " + std::to_string(n);
      at::Tensor gathered = at::full({p * n}, -1.0, at::TensorOptions().dtype(type));
      comm->all_gather(block(me, n, type), gathered)->wait();
      for (int r = 0; r < p; ++r)
        EXPECT_TRUE(at::equal(gathered.narrow(0, r * n, n), block(r, n, type)))
            << what << ": rank " << r << "'s block";
      // Rank r contributes (r + 1) x its block k to block k: block k sums to p(p+1)/2 x block(k).
      at::Tensor input = at::empty({p * n}, at::TensorOptions().dtype(type));
      for (int k = 0; k < p; ++k) input.narrow(0, k * n, n).copy_(block(k, n, type) * (me + 1));
      at::Tensor mine = at::full({n}, -1.0, at::TensorOptions().dtype(type));
      comm->reduce_scatter_sum(input, mine)->wait();
      EXPECT_TRUE(at::equal(mine, block(me, n, type) * (p * (p + 1) / 2))) << what;
    }
  at::Tensor wrong = at::zeros({3});
  EXPECT_THROW(comm->all_gather(at::zeros({2}), wrong), std::logic_error)
      << "sizes that do not fit";
  EXPECT_THROW(comm->reduce_scatter_sum(at::zeros({2 * p + 1}), at::zeros({2})), std::logic_error);
}

TEST(DataParallel, SpatialAndDataParallelTogether) {
  if (world().size() < 4) GTEST_SKIP() << "needs 4 ranks: 2 replicas x 2 shards";
  run_layout({2, 1, 1});
}

// ---- the Trainer itself -------------------------------------------------------------------------

constexpr int64_t kSide = 8;
constexpr int kTrain = 8, kVal = 4;  // whole steps at 1, 2 and 4 replicas of batch 1

// Training volume i (validation: kTrain + i): noisy colours over a box of class 1 and one of 2
// whose sizes vary with i.
void write_volume(const dataset::DatasetPaths& paths, dataset::Split split, int index, int key) {
  torch::manual_seed(500 + key);
  at::Tensor mask =
      labels_of(key).narrow(1, 4, kSide).narrow(2, 4, kSide).narrow(3, 4, kSide)[0].contiguous();
  at::Tensor image = at::one_hot(mask, 3).permute({3, 0, 1, 2}).to(at::kFloat) * 0.6 +
                     0.3 * at::randn({3, kSide, kSide, kSide});
  image = image.contiguous();
  const at::Tensor m16 = mask.to(at::kInt);
  std::vector<uint16_t> m(static_cast<std::size_t>(m16.numel()));
  for (std::size_t k = 0; k < m.size(); ++k) m[k] = static_cast<uint16_t>(m16.data_ptr<int>()[k]);
  core::write_npy(paths.volume_file(split, index, 0), core::DType::Float32,
                  {3, kSide, kSide, kSide}, image.data_ptr<float>());
  core::write_npy(paths.mask_file(split, index, 0), core::DType::UInt16, {kSide, kSide, kSide},
                  m.data());
}

model::UNet3d trainer_model() {
  torch::manual_seed(31);
  model::UNetOptions o;
  o.in_channels = 3;
  o.n_classes = 3;
  o.layers = 1;
  o.base_channels = 4;
  o.group_norm_groups = 2;
  return model::UNet3d(o);
}

// What the replay needs of one training sample: image (1, 3, D, H, W) and mask (1, D, H, W).
struct Sample {
  at::Tensor image, mask;
};

// Two epochs of train::Trainer on R = world size replicas of batch 1 against a one-process replay
// written here: each step over the same samples (the replicas' t-th samples), the loss the mean of
// their per-sample losses with the Trainer's class weights, torch's clip and Adam at the epochs'
// LRs (lr0, then (lr0 + min)/2 with T_0 = 2). A second replay with the global batch as one batch
// (the one-rank run of a strong-scaling study) ends elsewhere.
TEST(DataParallel, TrainerOnReplicasTakesTheStepsOfTheMeanOfTheReplicasWeightedLosses) {
  const int replicas = world().size();
  test::TempDir dir;  // one per rank: every rank writes the same volumes for itself
  const dataset::DatasetPaths paths{dir.path()};
  for (dataset::Split sp : {dataset::Split::Training, dataset::Split::Validation}) {
    core::create_directories(paths.volumes_dir(sp));
    core::create_directories(paths.masks_dir(sp));
  }
  for (int i = 0; i < kTrain; ++i) write_volume(paths, dataset::Split::Training, i, i);
  for (int i = 0; i < kVal; ++i) write_volume(paths, dataset::Split::Validation, i, kTrain + i);
  const dataset::FractalDataset train_set(paths, dataset::Split::Training, dataset::ShardLayout(),
                                          0, kSide);
  const dataset::FractalDataset val_set(paths, dataset::Split::Validation, dataset::ShardLayout(),
                                        0, kSide);

  benchmark::SegmentationOptions o;
  o.local_batch_size = 1;
  o.epochs = 2;
  o.target_dice = 2.0;
  o.warmup_batches = 0;
  o.learning_rate = 1e-2;
  o.min_learning_rate = 1e-3;
  o.T_0 = 2;
  o.T_mult = 1;
  o.amp_bf16 = false;
  o.seed = 5;
  o.n_classes = 3;
  o.ce_weight_sample_fraction = 1.0;
  o.loader_workers = 0;
  const dist::ProcessGrid grid(world().size(), world().rank(), {1, 1, 1}, {2, 3, 4});
  benchmark::Parallelism parallel;
  parallel.world = dist::make_mpi_tensor_comm(world());
  benchmark::SegmentationTraining trainer = benchmark::make_segmentation_training(
      trainer_model(), o, train_set, val_set, c10::Device(c10::kCPU), world(), grid, parallel);
  trainer.task->estimate_class_weights(world());
  std::vector<benchmark::EpochStats> stats;
  trainer.loop->run([&](const train::LoopEpoch& loop_epoch) {
    const benchmark::EpochStats e = benchmark::epoch_stats(loop_epoch);
    stats.push_back(e);
  });
  ASSERT_EQ(stats.size(), 2u);

  std::vector<Sample> samples;
  for (std::size_t i = 0; i < train_set.size(); ++i) {
    const data::Example e = train_set.get(i, 0);
    samples.push_back({e.fields[0].unsqueeze(0), e.fields[1].to(at::kLong).unsqueeze(0)});
  }
  const at::Tensor weights = at::tensor(trainer.task->class_weights(), at::kDouble).to(at::kFloat);
  ASSERT_GT(weights[1].item<double>(), 5 * weights[0].item<double>()) << "the weights must matter";
  const double lrs[2] = {o.learning_rate, (o.learning_rate + o.min_learning_rate) / 2};

  // by_replica: the benchmark's loss across replicas; else one batch of the global batch.
  const auto replay = [&](bool by_replica, std::vector<double>* overall_loss) {
    model::UNet3d m = trainer_model();
    torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(o.learning_rate));
    for (int64_t epoch = 1; epoch <= 2; ++epoch) {
      for (auto& g : adam.param_groups()) g.options().set_lr(lrs[epoch - 1]);
      std::vector<std::vector<int64_t>> order;
      for (int k = 0; k < replicas; ++k)
        order.push_back(data::training_indices(kTrain, replicas, k, o.seed, epoch));
      const auto one = data::training_indices(kTrain, 1, 0, o.seed, epoch);
      double loss_sum = 0;
      for (std::size_t t = 0; t < order[0].size(); ++t) {
        std::set<int64_t> step, single(one.begin() + static_cast<std::ptrdiff_t>(t) * replicas,
                                       one.begin() + static_cast<std::ptrdiff_t>(t + 1) * replicas);
        at::Tensor loss = at::zeros({});
        std::vector<at::Tensor> images, masks;
        for (int k = 0; k < replicas; ++k) {
          const Sample& s =
              samples[static_cast<std::size_t>(order[static_cast<std::size_t>(k)][t])];
          step.insert(order[static_cast<std::size_t>(k)][t]);
          images.push_back(s.image);
          masks.push_back(s.mask);
          if (by_replica)
            loss = loss + train::segmentation_loss(m->forward(s.image), s.mask, weights).loss;
        }
        EXPECT_EQ(step, single) << "epoch " << epoch << " step " << t
                                << ": other samples than one process's";
        loss = by_replica
                   ? loss / replicas
                   : train::segmentation_loss(m->forward(at::cat(images)), at::cat(masks), weights)
                         .loss;
        loss_sum += loss.item<double>() * replicas;
        adam.zero_grad();
        loss.backward();
        torch::nn::utils::clip_grad_norm_(m->parameters(), 1.0);
        adam.step();
      }
      if (overall_loss) overall_loss->push_back(loss_sum / kTrain);
    }
    return m;
  };
  std::vector<double> overall;
  model::UNet3d mean_of_replicas = replay(true, &overall);
  const auto got = trainer.task->model()->parameters();
  const auto want = mean_of_replicas->parameters();
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, test::relative_error(got[i], want[i]));
  EXPECT_LT(worst, 1e-4) << "the Trainer's parameters after 2 epochs on " << replicas
                         << " replicas";
  for (std::size_t e = 0; e < 2; ++e)
    EXPECT_NEAR(stats[e].overall_loss, overall[e], 1e-5 * overall[e]) << "epoch " << e + 1;

  if (replicas > 1) {
    model::UNet3d whole_batch = replay(false, nullptr);
    double apart = 0;
    const auto other = whole_batch->parameters();
    for (std::size_t i = 0; i < got.size(); ++i)
      apart = std::max(apart, test::relative_error(got[i], other[i]));
    EXPECT_GT(apart, 100 * 1e-4)
        << "one process with the global batch as one batch should end elsewhere";
  }
}

}  // namespace
}  // namespace scaffold
