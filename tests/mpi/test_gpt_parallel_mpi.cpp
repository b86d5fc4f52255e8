// The GPT's parallelism against one process holding the whole model and batch:
// - tensor parallel on 2 ranks = TP size 1: logits (each rank's vocabulary slice), loss and every
//   gradient (each rank's slice of the sharded ones, all of the replicated ones) within 1e-5
//   relative, with RoPE and learned positions, selective and full recompute;
// - sequence parallelism = tensor parallelism without it: logits, loss and every gradient (the
//   LayerNorm and row-parallel bias gradients once summed over the group) within 1e-5 relative,
//   with RoPE and learned positions, selective and full recompute; without that sum they differ;
// - the shared loop with tensor x data parallelism (TP 1 and 2, all ranks; 2 x 2 on 4 ranks;
//   TP 2 with sequence parallelism),
//   micro-batch 1 and 2 accumulation steps, gradient clipping that engages, two iterations: the
//   parameters equal those of one process taking the same two SGD steps on the whole global
//   batch, clipped by torch's clip_grad_norm_. Run under mpiexec -n 2 and 4.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "gpt_shard_util.hpp"
#include "mpi_test_main.hpp"
#include "train/loop.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/llm_training/data/synthetic_tokens.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/task.hpp"

namespace scaffold::llm {
namespace {

using model::test::tensors_close;
using test::slice_of;
using test::split_dim;
using test::world;

llm::GptOptions tiny(PositionEmbedding pe, Recompute r) {
  GptOptions o;
  o.num_layers = 2;
  o.hidden_size = 32;
  o.num_attention_heads = 4;
  o.ffn_hidden_size = 64;
  o.seq_length = 12;
  o.padded_vocab_size = 96;
  o.position_embedding = pe;
  o.recompute = r;
  o.init_method_std = 0.05;
  return o;
}

struct Groups {
  std::unique_ptr<dist::Communicator> tp_comm, dp_comm;
  std::shared_ptr<const TensorParallel> tp;
};

// Consecutive ranks form the tensor-parallel groups; ranks with the same TP rank the data-parallel
// ones.
Groups make_groups(int tp_size) {
  Groups g;
  const int rank = world().rank();
  g.tp_comm = world().split(rank / tp_size, rank % tp_size);
  g.dp_comm = world().split(rank % tp_size, rank / tp_size);
  auto tp = std::make_shared<TensorParallel>();
  tp->size = tp_size;
  tp->rank = rank % tp_size;
  if (tp_size > 1) tp->group = dist::make_tensor_comm(*g.tp_comm, c10::Device(c10::kCPU));
  g.tp = tp;
  return g;
}

TEST(GptTensorParallel, TwoRanksEqualOneForLogitsLossAndEveryGradient) {
  if (world().size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const Groups g = make_groups(2);
  torch::manual_seed(11);
  const at::Tensor tokens = at::randint(96, {3, 13}, at::kLong);  // the same on every rank
  const at::Tensor input = tokens.narrow(1, 0, 12), labels = tokens.narrow(1, 1, 12);
  for (auto pe : {PositionEmbedding::kLearned, PositionEmbedding::kRope})
    for (auto r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      const std::string what = std::string(pe == PositionEmbedding::kRope ? "rope" : "learned") +
                               "/recompute " + std::to_string(static_cast<int>(r));
      torch::manual_seed(12);
      Gpt whole(tiny(pe, r));
      torch::manual_seed(12);
      Gpt sharded(tiny(pe, r), g.tp);
      const at::Tensor logits_whole = whole->forward(input);
      const at::Tensor logits_mine = sharded->forward(input);
      EXPECT_TRUE(tensors_close(logits_mine, slice_of(logits_whole, 2, 2, g.tp->rank), 1e-5,
                                what + " logits"));
      const at::Tensor loss_whole = whole->token_losses(input, labels).mean();
      const at::Tensor loss_mine = sharded->token_losses(input, labels).mean();
      EXPECT_NEAR(loss_mine.item<double>(), loss_whole.item<double>(),
                  1e-5 * loss_whole.item<double>())
          << what;
      loss_whole.backward();
      loss_mine.backward();
      const auto ref = whole->named_parameters();
      const auto mine = sharded->named_parameters();
      ASSERT_EQ(ref.size(), mine.size());
      for (const auto& p : ref) {
        const at::Tensor* m = mine.find(p.key());
        ASSERT_NE(m, nullptr) << p.key();
        const int dim = split_dim(p.key());
        EXPECT_EQ(GptImpl::is_tensor_parallel(p.key()), dim >= 0) << p.key();
        EXPECT_TRUE(tensors_close(*m, slice_of(p.value(), dim, 2, g.tp->rank), 0,
                                  what + " " + p.key() + " value"));
        EXPECT_TRUE(tensors_close(m->grad(), slice_of(p.value().grad(), dim, 2, g.tp->rank), 1e-5,
                                  what + " " + p.key() + " gradient"));
      }
    }
}

TEST(GptSequenceParallel, EqualsTensorParallelForLogitsLossAndEveryGradient) {
  if (world().size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const Groups g = make_groups(2);
  torch::manual_seed(13);
  const at::Tensor tokens = at::randint(96, {3, 13}, at::kLong);  // the same on every rank
  const at::Tensor input = tokens.narrow(1, 0, 12), labels = tokens.narrow(1, 1, 12);
  for (auto pe : {PositionEmbedding::kLearned, PositionEmbedding::kRope})
    for (auto r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      const std::string what = std::string(pe == PositionEmbedding::kRope ? "rope" : "learned") +
                               "/recompute " + std::to_string(static_cast<int>(r));
      GptOptions with = tiny(pe, r);
      with.sequence_parallel = true;
      torch::manual_seed(14);
      Gpt plain(tiny(pe, r), g.tp);
      torch::manual_seed(14);
      Gpt sequence(with, g.tp);
      EXPECT_TRUE(
          tensors_close(sequence->forward(input), plain->forward(input), 1e-5, what + " logits"));
      const at::Tensor loss_plain = plain->token_losses(input, labels).mean();
      const at::Tensor loss_seq = sequence->token_losses(input, labels).mean();
      EXPECT_NEAR(loss_seq.item<double>(), loss_plain.item<double>(),
                  1e-5 * loss_plain.item<double>())
          << what;
      loss_plain.backward();
      loss_seq.backward();
      // Before the sum, a LayerNorm's gradient is this rank's part only: it must differ.
      const at::Tensor ln_before = sequence->final_layernorm->weight.grad().clone();
      EXPECT_FALSE(tensors_close(ln_before, plain->final_layernorm->weight.grad(), 1e-3, ""))
          << what << ": the unsummed gradient already agrees, so the test could not fail";
      sequence->reduce_sequence_parallel_gradients();
      const auto ref = plain->named_parameters();
      const auto mine = sequence->named_parameters();
      ASSERT_EQ(ref.size(), mine.size());
      int summed = 0;
      for (const auto& p : ref) {
        const at::Tensor* m = mine.find(p.key());
        ASSERT_NE(m, nullptr) << p.key();
        summed += GptImpl::is_sequence_parallel(p.key()) ? 1 : 0;
        EXPECT_TRUE(
            tensors_close(m->grad(), p.value().grad(), 1e-5, what + " " + p.key() + " gradient"));
      }
      // Per layer 2 LayerNorms (weight and bias) and 2 row-parallel biases; the final LayerNorm.
      EXPECT_EQ(summed, 2 * (2 * 2 + 2) + 2);
    }
}

std::unique_ptr<torch::optim::Optimizer> sgd(const std::vector<at::Tensor>& p) {
  return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.5));
}

TEST(GptParallelLoop, TensorTimesDataParallelEqualsOneProcessWithTheWholeBatch) {
  const int world_size = world().size();
  constexpr int64_t kMicro = 1, kAccumulation = 2, kSteps = 2;
  constexpr double kClip = 0.05;  // below the initial gradient norm: clipping engages
  for (const auto& [tp_size, sequence_parallel] :
       std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {2, true}}) {
    if (world_size % tp_size != 0) continue;
    const int dp = world_size / tp_size;
    const int64_t global_batch = kMicro * kAccumulation * dp;
    const std::string what = "TP " + std::to_string(tp_size) + " x DP " + std::to_string(dp) +
                             (sequence_parallel ? " (sequence parallel)" : "");
    const SyntheticTokens data(SyntheticTokensOptions{64, 12, 96, 5, 0});
    GptOptions o = tiny(PositionEmbedding::kRope, Recompute::kSelective);
    o.sequence_parallel = sequence_parallel;

    // Parallel: the shared loop.
    const Groups g = make_groups(tp_size);
    torch::manual_seed(21);
    GptTask task(Gpt(o, g.tp), data, data, c10::Device(c10::kCPU), {});
    train::LoopOptions lo;
    lo.local_batch_size = kMicro;
    lo.accumulation_steps = kAccumulation;
    lo.train_batches_per_epoch = kSteps;
    lo.max_steps = kSteps;
    lo.validation_every = 0;
    lo.loader_workers = 0;
    lo.make_optimizer = sgd;
    lo.grad_clip_norm = kClip;
    std::vector<double> norms;
    lo.clip_gradients = [&task, &norms](double max_norm, torch::optim::Optimizer& opt) {
      norms.push_back(task.clip_gradients(max_norm, &opt).item<double>());
    };
    if (sequence_parallel)
      lo.finish_gradients = [&task] { task.reduce_sequence_parallel_gradients(); };
    train::LoopParallelism lp;
    if (dp > 1) lp.world = dist::make_tensor_comm(*g.dp_comm, c10::Device(c10::kCPU));
    if (tp_size > 1) lp.replica_comm = g.dp_comm.get();
    const dist::ProcessGrid grid(world_size, world().rank(), {tp_size, 1, 1}, {2, 3, 4});
    train::TrainingLoop loop(task, lo, c10::Device(c10::kCPU), world(), grid, lp);
    double parallel_loss = 0;
    const train::LoopResult result =
        loop.run([&](const train::LoopEpoch& e) { parallel_loss = e.metrics.values[0].second; });
    ASSERT_EQ(result.total_optimizer_steps, kSteps) << what;

    // Reference: the whole model, global batches of consecutive stream samples, torch's clipping.
    torch::manual_seed(21);
    Gpt whole(tiny(PositionEmbedding::kRope, Recompute::kSelective));
    auto opt = sgd(whole->parameters());
    double loss_sum = 0;
    std::vector<double> ref_norms;
    for (int64_t t = 0; t < kSteps; ++t) {
      std::vector<at::Tensor> rows;
      for (int64_t i = t * global_batch; i < (t + 1) * global_batch; ++i)
        rows.push_back(data.get(static_cast<std::size_t>(i), 0).fields[0]);
      const at::Tensor tokens = at::stack(rows);
      opt->zero_grad();
      const at::Tensor loss =
          whole->token_losses(tokens.narrow(1, 0, 12), tokens.narrow(1, 1, 12)).mean();
      loss.backward();
      loss_sum += loss.item<double>();
      ref_norms.push_back(torch::nn::utils::clip_grad_norm_(whole->parameters(), kClip));
      opt->step();
    }
    EXPECT_NEAR(parallel_loss, loss_sum / kSteps, 1e-5 * loss_sum)
        << what << ": the interval's mean loss";
    ASSERT_EQ(norms.size(), ref_norms.size());
    for (std::size_t i = 0; i < norms.size(); ++i) {
      EXPECT_NEAR(norms[i], ref_norms[i], 1e-5 * ref_norms[i]) << what << " step " << i;
      EXPECT_GT(norms[i], kClip) << "clipping engaged";
    }
    const auto mine = task.model()->named_parameters();
    for (const auto& p : whole->named_parameters()) {
      const at::Tensor* m = mine.find(p.key());
      ASSERT_NE(m, nullptr) << p.key();
      EXPECT_TRUE(tensors_close(*m, slice_of(p.value(), split_dim(p.key()), tp_size, g.tp->rank),
                                1e-5, what + " " + p.key()));
    }
    // The steps moved the model (a no-op would also "agree" with a no-op reference).
    torch::manual_seed(21);
    Gpt initial(tiny(PositionEmbedding::kRope, Recompute::kSelective));
    EXPECT_GT((initial->parameters()[0] - whole->parameters()[0]).abs().max().item<double>(), 1e-4);
  }
}

}  // namespace
}  // namespace scaffold::llm
