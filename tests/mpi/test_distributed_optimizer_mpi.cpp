// Megatron's distributed optimizer (train::ShardedAdamW, use_distributed_optimizer 1) against the
// plain AdamW (use_distributed_optimizer 0), both through the shared loop with the tiny GPT on
// every rank as data-parallel replicas (gradient accumulation 2, clipping 1.0):
// - each iteration's loss and the parameters after 4 iterations agree within 1e-6 relative, with
//   the one-pass kernel (FusedAdamW against ShardedAdamW's fused slices) and with LibTorch's
//   operations (torch::optim::AdamW against the slices' AdamW arithmetic): only the elementwise
//   kernels' vector or scalar paths may round differently;
// - each rank holds 1/DP of the optimizer state (exp_avg + exp_avg_sq bytes, within DP elements:
//   slices of ceil(N / DP), the last one shorter);
// - 2 iterations, a checkpoint per rank, a fresh process state resuming and running 2 more equals
//   4 uninterrupted iterations bitwise (the restored shards are exactly what was saved);
// - the gather in small chunks equals one chunk; the gradients' reduce-scatter leaves each rank
//   the sum in its slice and zeros elsewhere, against the sum written out;
// - a shard loaded by an optimizer of another data-parallel size is refused by name.
// Run under mpiexec -n 2 and 3 (uneven slices).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "mpi_test_main.hpp"
#include "train/loop.hpp"
#include "train/sharded_adam.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/llm_training/data/synthetic_tokens.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/task.hpp"

namespace scaffold::llm {
namespace {

namespace fs = std::filesystem;
using model::test::tensors_close;
using test::world;

GptOptions tiny() {
  GptOptions o;
  o.num_layers = 2;
  o.hidden_size = 32;
  o.num_attention_heads = 4;
  o.ffn_hidden_size = 64;
  o.seq_length = 12;
  o.padded_vocab_size = 96;
  o.init_method_std = 0.05;
  return o;
}

AdamOptions adam(bool fused = true) {
  AdamOptions a;
  a.fused = fused;
  a.lr = 1e-3;  // large enough that 4 steps move every parameter visibly
  a.weight_decay = 0.1;
  return a;
}

struct TrainedRun {
  std::vector<double> losses;  // per iteration (one iteration per log interval)
  std::vector<at::Tensor> params;
  std::vector<std::string> names;  // of params
  int64_t state_bytes = 0;
};

// `steps` iterations from a fresh model (seed 21), or resumed from `resume_dir`; checkpoints into
// `save_dir` after every iteration when it is set.
TrainedRun train(bool distributed, int64_t steps, const fs::path& save_dir = {},
                 const fs::path& resume_dir = {}, bool fused = true) {
  const SyntheticTokens data(SyntheticTokensOptions{64, 12, 96, 5, 0});
  const int dp = world().size();
  std::shared_ptr<dist::TensorComm> comm = dist::make_tensor_comm(world(), c10::Device(c10::kCPU));
  torch::manual_seed(21);
  // The sharded run's ranks each hold a slice of the reduced gradient: the norm adds them all.
  GptTaskOptions to;
  if (distributed) to.norm_group = comm;
  GptTask task(Gpt(tiny()), data, data, c10::Device(c10::kCPU), to);
  train::LoopOptions lo;
  lo.local_batch_size = 1;
  lo.accumulation_steps = 2;
  lo.train_batches_per_epoch = 1;
  lo.max_steps = steps;
  lo.validation_every = 0;
  lo.loader_workers = 0;
  lo.make_optimizer =
      distributed ? megatron_distributed_adam(adam(fused), comm) : megatron_adam(adam(fused));
  lo.grad_clip_norm = 1.0;
  lo.clip_gradients = [&task](double max_norm, torch::optim::Optimizer& opt) {
    task.clip_gradients(max_norm, &opt);
  };
  if (!save_dir.empty()) {
    lo.checkpoint_interval = 1;
    lo.checkpoint_dir = save_dir;
  }
  train::LoopParallelism lp;
  lp.world = comm;
  const dist::ProcessGrid grid(dp, world().rank(), {1, 1, 1}, {2, 3, 4});
  train::TrainingLoop loop(task, lo, c10::Device(c10::kCPU), world(), grid, lp);
  if (!resume_dir.empty()) loop.resume(resume_dir);
  TrainedRun r;
  loop.run([&](const train::LoopEpoch& e) { r.losses.push_back(e.metrics.values[0].second); });
  for (const auto& named : task.model()->named_parameters()) {
    r.names.push_back(named.key());
    r.params.push_back(named.value().detach().clone());
  }
  r.state_bytes = train::adam_state_bytes(loop.optimizer());
  return r;
}

// The run's parameters with the key third of each head's QKV bias zeroed. Those elements have no
// gradient in exact arithmetic (a softmax is unchanged by adding one number to every score of a
// row): what they get is rounding noise, which Adam divides by its own tiny magnitude (eps 1e-8),
// so they move by noise, and two summation orders of the gradients (all-reduce, reduce-scatter)
// move them apart. Left out where two such runs are compared.
std::vector<at::Tensor> without_key_bias(const TrainedRun& r) {
  std::vector<at::Tensor> out;
  for (std::size_t i = 0; i < r.params.size(); ++i) {
    at::Tensor p = r.params[i].clone();
    const std::string& name = r.names[i];
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "qkv_bias") == 0)
      p.view({tiny().num_attention_heads, 3, -1}).select(1, 1).zero_();
    out.push_back(p);
  }
  return out;
}

class DistributedOptimizer : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    std::string root;
    if (world().rank() == 0)
      root = (fs::temp_directory_path() / ("scaffold-distopt-mpi-" + std::to_string(::getpid()) +
                                           "-" + std::to_string(std::random_device{}())))
                 .string();
    world().broadcast(root, 0);
    root_ = root;
  }
  void TearDown() override {
    world().barrier();
    std::error_code ec;
    if (world().rank() == 0) fs::remove_all(root_, ec);
  }
  fs::path root_;
};

TEST_F(DistributedOptimizer, EqualsAdamWWithOneDpthOfTheStatePerRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism";
  // Both kernels: the one-pass update (default) and LibTorch's operations.
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "libtorch");
    const TrainedRun plain = train(false, 4, {}, {}, fused),
                     sharded = train(true, 4, {}, {}, fused);
    ASSERT_EQ(plain.losses.size(), 4u);
    ASSERT_EQ(sharded.losses.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(sharded.losses[i], plain.losses[i], 1e-6 * plain.losses[i])
          << "iteration " << i + 1;
    ASSERT_EQ(sharded.params.size(), plain.params.size());
    const auto ours = without_key_bias(sharded), ref = without_key_bias(plain);
    for (std::size_t i = 0; i < ref.size(); ++i)
      EXPECT_TRUE(tensors_close(ours[i], ref[i], 1e-6, plain.names[i]));
    // The steps moved the model (equal no-ops would also agree).
    torch::manual_seed(21);
    Gpt initial(tiny());
    EXPECT_GT((initial->parameters()[0] - plain.params[0]).abs().max().item<double>(), 1e-4);

    // exp_avg and exp_avg_sq: 8 bytes per element; the plain optimizer holds all on every rank.
    int64_t elements = 0;
    for (const at::Tensor& p : plain.params) elements += p.numel();
    EXPECT_EQ(plain.state_bytes, 8 * elements);
    const double dp = world().size();
    EXPECT_NEAR(static_cast<double>(sharded.state_bytes), 8.0 * static_cast<double>(elements) / dp,
                8.0 * dp)
        << "1/" << dp << " of the state on rank " << world().rank();
  }
}

TEST_F(DistributedOptimizer, ARestartFromPerRankShardsContinuesExactly) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism";
  const TrainedRun whole = train(true, 4);
  const fs::path dir = root_ / "checkpoints";
  train(true, 2, dir);
  EXPECT_TRUE(fs::exists(dir / ("checkpoint_last.rank" + std::to_string(world().rank()))));
  EXPECT_FALSE(fs::exists(dir / "checkpoint_last"))
      << "no single-file checkpoint with sharded state";
  const TrainedRun resumed = train(true, 4, {}, dir);
  ASSERT_EQ(resumed.losses.size(), 2u) << "iterations 3 and 4 only";
  EXPECT_EQ(resumed.losses[0], whole.losses[2]);
  EXPECT_EQ(resumed.losses[1], whole.losses[3]);
  for (std::size_t i = 0; i < whole.params.size(); ++i)
    EXPECT_TRUE(
        tensors_close(resumed.params[i], whole.params[i], 0.0, "parameter " + std::to_string(i)));
}

// The gather in chunks of 777 elements (crossing parameter and shard boundaries) leaves the same
// parameters as one chunk holding everything, bitwise: every element is copied.
TEST_F(DistributedOptimizer, AChunkedGatherEqualsOneChunk) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism";
  std::shared_ptr<dist::TensorComm> comm = dist::make_tensor_comm(world(), c10::Device(c10::kCPU));
  std::vector<std::vector<at::Tensor>> results;
  for (const int64_t chunk : {train::ShardedAdamW::kGatherChunk, int64_t{777}}) {
    torch::manual_seed(21);
    Gpt model(tiny());
    train::ShardedAdamW opt({torch::optim::OptimizerParamGroup(model->parameters())},
                            torch::optim::AdamWOptions(1e-3).weight_decay(0.1), comm, chunk);
    for (int step = 0; step < 3; ++step) {
      // The same gradients on every rank, as after the loop's all-reduce.
      for (const at::Tensor& p : model->parameters())
        p.mutable_grad() = (p.detach() * 0.5).sin() + 0.01 * step;
      opt.step();
    }
    results.emplace_back();
    for (const at::Tensor& p : model->parameters()) results.back().push_back(p.detach().clone());
  }
  for (std::size_t i = 0; i < results[0].size(); ++i)
    EXPECT_TRUE(at::equal(results[0][i], results[1][i])) << "parameter " << i;
}

// The gradients' reduce-scatter against the sum written out here: rank r's gradients are
// (r + 1) x g + r, so the sum over DP ranks is (DP (DP + 1) / 2) g + DP (DP - 1) / 2; after it,
// each rank holds that sum x scale inside its slice [ceil(N / DP) r, ...) of the flattened
// parameters and zeros elsewhere, in chunks of 777 elements (crossing parameter and slice
// boundaries) as in one chunk.
TEST_F(DistributedOptimizer, TheGradientsAreReduceScatteredIntoEachRanksSlice) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism";
  std::shared_ptr<dist::TensorComm> comm = dist::make_tensor_comm(world(), c10::Device(c10::kCPU));
  const int dp = world().size(), r = world().rank();
  const double scale = 1.0 / dp;
  for (const int64_t chunk : {train::ShardedAdamW::kGatherChunk, int64_t{777}}) {
    torch::manual_seed(21);
    Gpt model(tiny());
    const std::vector<at::Tensor> params = model->parameters();
    train::ShardedAdamW opt({torch::optim::OptimizerParamGroup(params)},
                            torch::optim::AdamWOptions(1e-3), comm, chunk);
    ASSERT_TRUE(opt.reduces_gradients());
    std::vector<at::Tensor> g;
    for (const at::Tensor& p : params) {
      g.push_back((p.detach() * 3.0).sin());
      p.mutable_grad() = g.back() * (r + 1) + r;
    }
    opt.reduce_scatter_gradients(scale);
    int64_t total = 0;
    for (const at::Tensor& p : params) total += p.numel();
    const int64_t block = (total + dp - 1) / dp, begin = block * r,
                  end = std::min(total, begin + block);
    int64_t offset = 0, held = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const at::Tensor want_all =
          ((g[i] * (dp * (dp + 1) / 2.0) + dp * (dp - 1) / 2.0) * scale).reshape(-1);
      const at::Tensor got = params[i].grad().reshape(-1);
      for (int64_t e = 0; e < got.numel(); e += 97) {  // a sample of elements across the model
        const int64_t flat = offset + e;
        const double want = flat >= begin && flat < end ? want_all[e].item<double>() : 0.0;
        EXPECT_NEAR(got[e].item<double>(), want, 1e-5) << "chunk " << chunk << ", flat " << flat;
      }
      held += (got != 0).sum().item<int64_t>();
      offset += params[i].numel();
    }
    EXPECT_LE(held, end - begin) << "nothing outside the slice";
    EXPECT_GT(held, (end - begin) / 2) << "the slice holds the reduced values";
  }
}

TEST_F(DistributedOptimizer, AShardOfAnotherDataParallelSizeIsRefused) {
  if (world().size() < 2) GTEST_SKIP() << "needs data parallelism";
  torch::manual_seed(21);
  Gpt model(tiny());
  std::shared_ptr<dist::TensorComm> comm = dist::make_tensor_comm(world(), c10::Device(c10::kCPU));
  const auto sharded = megatron_distributed_adam(adam(), comm)(model->parameters());
  torch::serialize::OutputArchive out;
  sharded->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  const auto single = megatron_distributed_adam(adam(), nullptr)(model->parameters());  // DP 1
  torch::serialize::InputArchive in;
  const std::string text = bytes.str();
  in.load_from(text.data(), text.size());
  try {
    single->load(in);
    ADD_FAILURE() << "a DP " << world().size() << " shard loaded at DP 1";
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("rank " + std::to_string(world().rank()) + " of " +
                        std::to_string(world().size())),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("resume with the data-parallel size"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace scaffold::llm
