// The image-classification workload's data parallelism: P ranks with local batch B, each with
// BatchNorm statistics of its own half (DDP, no SyncBatchNorm), take the same SGD step through
// the shared TrainingLoop as one process that runs the P local batches separately and averages
// their gradients. Run under mpiexec -n 2 and 4.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <memory>
#include <vector>

#include "data/sampler.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "mpi_test_main.hpp"
#include "train/loop.hpp"
#include "workloads/image_classification/synthetic_images.hpp"
#include "workloads/image_classification/task.hpp"

namespace scaffold {
namespace {

using test::world;

constexpr double kLr = 0.05, kMomentum = 0.9, kWeightDecay = 1e-4;
constexpr uint64_t kSeed = 11;

imgcls::ResNetOptions tiny_resnet() {
  imgcls::ResNetOptions o;
  o.depth = 18;
  o.num_classes = 5;
  return o;
}

std::unique_ptr<torch::optim::Optimizer> sgd(const std::vector<at::Tensor>& p) {
  return std::make_unique<torch::optim::SGD>(
      p, torch::optim::SGDOptions(kLr).momentum(kMomentum).weight_decay(kWeightDecay));
}

TEST(ImageClassificationDataParallel, ReplicasEqualOneProcessAveragingTheirHalfBatchGradients) {
  const int P = world().size();
  constexpr int64_t kLocal = 2;
  imgcls::SyntheticImagesOptions so;
  so.count = P * kLocal;  // one step per epoch
  so.image_size = 64;     // 2x2 at the last stage: BatchNorm over 8 values, not 2
  so.num_classes = 5;
  so.seed = kSeed;
  const imgcls::SyntheticImages train_set(so);
  const imgcls::SyntheticImages val_set(so);

  torch::manual_seed(5);
  imgcls::ResNet reference(tiny_resnet());
  // The same initial weights on every rank (the loop also broadcasts rank 0's).
  imgcls::ResNet net(tiny_resnet());
  {
    torch::NoGradGuard no_grad;
    const auto src = reference->parameters();
    const auto dst = net->parameters();
    for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    const auto bsrc = reference->buffers();
    const auto bdst = net->buffers();
    for (std::size_t i = 0; i < bsrc.size(); ++i) bdst[i].copy_(bsrc[i]);
  }

  // Distributed: the loop, one epoch of one step.
  imgcls::ClassificationTaskOptions to;
  to.channels_last = false;
  imgcls::ClassificationTask task(net, train_set, val_set, c10::Device(c10::kCPU), to);
  train::LoopOptions lo;
  lo.local_batch_size = kLocal;
  lo.max_epochs = 1;
  lo.make_optimizer = sgd;
  lo.lr_after = [](int64_t) { return kLr; };
  lo.seed = kSeed;
  lo.loader_workers = 0;
  lo.broadcast_buffers = true;
  train::LoopParallelism lp;
  lp.world = dist::make_tensor_comm(world(), c10::Device(c10::kCPU));
  const dist::ProcessGrid grid(P, world().rank(), {1, 1, 1}, {2, 3, 4});
  train::TrainingLoop loop(task, lo, c10::Device(c10::kCPU), world(), grid, lp);
  const train::LoopResult result = loop.run([](const train::LoopEpoch&) {});
  ASSERT_EQ(result.total_optimizer_steps, 1);

  // Reference: each replica's local batch through the model separately (BatchNorm statistics per
  // local batch), the gradients averaged, one SGD step.
  reference->train();
  std::vector<at::Tensor> grad_sum;
  for (int r = 0; r < P; ++r) {
    const auto indices = data::training_indices(so.count, P, r, kSeed, /*epoch=*/1);
    std::vector<at::Tensor> images, labels;
    for (int64_t i : indices) {
      const auto e = train_set.get(static_cast<std::size_t>(i), 0);
      images.push_back(e.fields[0]);
      labels.push_back(e.fields[1]);
    }
    for (auto& p : reference->parameters()) p.mutable_grad() = at::Tensor();
    const at::Tensor loss =
        at::cross_entropy_loss(reference->forward(at::stack(images)), at::stack(labels));
    loss.backward();
    const auto params = reference->parameters();
    if (grad_sum.empty())
      for (const auto& p : params) grad_sum.push_back(p.grad().clone());
    else
      for (std::size_t i = 0; i < params.size(); ++i) grad_sum[i] += params[i].grad();
  }
  auto optimizer = sgd(reference->parameters());
  {
    const auto params = reference->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grad_sum[i] / P;
  }
  optimizer->step();

  const auto mine = net->parameters();
  const auto ref = reference->parameters();
  ASSERT_EQ(mine.size(), ref.size());
  double worst = 0.0;
  std::size_t worst_index = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = (mine[i] - ref[i]).abs().max().item<double>();
    if (err > worst) {
      worst = err;
      worst_index = i;
    }
  }
  // fp32 sums in another order: 1e-5 absolute on parameters of size ~0.1 (a step of lr 0.05
  // moves them by up to ~1e-2, so a wrong averaging would show as ~1e-3).
  EXPECT_LT(worst, 1e-5) << "parameter " << worst_index << " differs by " << worst
                         << " (tolerance 1e-5)";
  // And the step was not a no-op: the parameters moved.
  torch::manual_seed(5);
  imgcls::ResNet initial(tiny_resnet());
  EXPECT_GT((initial->parameters()[0] - ref[0]).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace scaffold
