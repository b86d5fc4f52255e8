// Data parallelism: R replicas with batch 1 each (optionally each split in space) take the same
// SGD step as one process with batch R, up to summation order; gradients are reduced in buckets
// started during backward. Run under mpiexec -n 2 and 4.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <array>
#include <string>
#include <vector>

#include "dist/grad_reducer.hpp"
#include "model/memory_format.hpp"
#include "model/unet.hpp"
#include "spatial_test_util.hpp"
#include "train/loss.hpp"
#include "train/trainer.hpp"

namespace scaffold {
namespace {

using test::world;

at::Tensor image_of(int index) {
  torch::manual_seed(2000 + index);
  return at::randn({1, 3, 16, 16, 16});
}

at::Tensor labels_of(int index) {
  torch::manual_seed(3000 + index);
  return at::randint(0, 3, {1, 16, 16, 16}, at::TensorOptions().dtype(at::kLong));
}

// Unit class weights: the CE of a batch is then the mean of its samples' CEs (every sample has
// the same number of voxels), so the batch-R loss is the mean of the replicas' batch-1 losses.
at::Tensor unit_weights() { return at::ones({3}); }

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
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(kLr));
  ref_opt.zero_grad();
  train::segmentation_loss(reference->forward(at::cat(images)), at::cat(labels), unit_weights()).loss.backward();
  std::vector<at::Tensor> ref_grads;
  for (const auto& p : reference->parameters()) ref_grads.push_back(p.grad().clone());
  ref_opt.step();
  const auto ref_after = parameters_after_step(reference);

  // Distributed: this rank's shard of sample `replica`, gradients summed over the world / R.
  model::UNetOptions o = test::small_unet(3);
  if (spatial > 1) o.spatial = s.ctx;
  torch::manual_seed(9);
  model::UNet3d net(o);
  if (channels_last) model::set_memory_format(*net, at::MemoryFormat::ChannelsLast3d);
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
  train::segmentation_loss(net->forward(image), mask, unit_weights(), sum).loss.backward();
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
    EXPECT_TRUE(summed.equal(after[i] * world().size()) || test::relative_error(summed / world().size(), after[i]) < 1e-7);
  }
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
    EXPECT_NE(std::string(e.what()).find("the ranks' parameters differ in the test"), std::string::npos) << e.what();
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

TEST(DataParallel, SpatialAndDataParallelTogether) {
  if (world().size() < 4) GTEST_SKIP() << "needs 4 ranks: 2 replicas x 2 shards";
  run_layout({2, 1, 1});
}

}  // namespace
}  // namespace scaffold
