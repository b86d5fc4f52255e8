// The GPT's pipeline parallelism against one process holding the whole model (8 layers) and
// batch: every layout of tensor (t) x pipeline (P) x data parallelism that fits the ranks, each
// with one contiguous run of layers per stage and with 2 interleaved model chunks per rank (PP 2
// on 2 ranks; PP 4, TP 2 x PP 2 with and without sequence parallelism, PP 2 x DP 2 on 4; TP 2 x
// PP 2 x DP 2 and PP 4 x DP 2 on 8), through the shared loop with 4 micro-batches per iteration
// (1F1B's warm-up, steady state and cool-down all occur at P 2 and 4), gradient clipping that
// engages and two SGD iterations: every iteration's loss, gradient norm and every parameter (each
// stage's layers, the tied embedding on both its stages) equal the one-process run's within 1e-5
// relative (float32; the loss is computed in float32 whatever the dtype, so float64 gains
// nothing). 1F1B (interleaved or not) and all-forward-then-all-backward give the same parameters
// bitwise: the same arithmetic in the same order. Run under mpiexec -n 2, 4 and 8.
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
#include "workloads/llm_training/pipeline.hpp"
#include "workloads/llm_training/task.hpp"

namespace scaffold::llm {
namespace {

using model::test::tensors_close;
using test::slice_of;
using test::split_dim;
using test::world;

constexpr int64_t kLayers = 8, kSeq = 12, kVocab = 96;
constexpr int64_t kMicro = 1, kMicroBatches = 4, kSteps = 2;
constexpr double kClip = 0.05;  // below the initial gradient norm: clipping engages

GptOptions tiny() {
  GptOptions o;
  o.num_layers = kLayers;
  o.hidden_size = 32;
  o.num_attention_heads = 4;
  o.ffn_hidden_size = 64;
  o.seq_length = kSeq;
  o.padded_vocab_size = kVocab;
  o.position_embedding = PositionEmbedding::kLearned;
  o.recompute = Recompute::kSelective;
  o.init_method_std = 0.05;
  return o;
}

// Megatron's grid, written out here: rank = (dp x P + pp) x t + tp.
struct Layout {
  int t = 1, p = 1, dp = 1;
  int tp_rank = 0, pp_rank = 0;
  std::unique_ptr<dist::Communicator> tp_comm, pp_comm, dp_comm, mp_comm;
  std::shared_ptr<TensorParallel> tp;
  std::shared_ptr<PipelineParallel> pp;
  std::shared_ptr<dist::TensorComm> model_parallel;
};

Layout make_layout(int t, int p, int chunks) {
  Layout l;
  const int rank = world().rank(), mp = t * p;
  l.t = t;
  l.p = p;
  l.dp = world().size() / mp;
  l.tp_rank = rank % t;
  l.pp_rank = (rank / t) % p;
  const int dp_rank = rank / mp;
  const c10::Device cpu(c10::kCPU);
  l.tp_comm = world().split(rank / t, l.tp_rank);
  l.pp_comm = world().split(dp_rank * t + l.tp_rank, l.pp_rank);
  l.dp_comm = world().split(rank % mp, dp_rank);
  l.mp_comm = world().split(dp_rank, rank % mp);
  l.tp = std::make_shared<TensorParallel>();
  l.tp->size = t;
  l.tp->rank = l.tp_rank;
  if (t > 1) l.tp->group = dist::make_tensor_comm(*l.tp_comm, cpu);
  l.pp = std::make_shared<PipelineParallel>();
  l.pp->stage = {p, l.pp_rank, chunks};
  if (p > 1) l.pp->group = dist::make_tensor_comm(*l.pp_comm, cpu);
  if (mp > 1) l.model_parallel = dist::make_tensor_comm(*l.mp_comm, cpu);
  return l;
}

// "layers.<i>.rest" of a stage -> "layers.<global index>.rest" of the whole model: local layer i
// is layer i % n of the stage's chunk i / n (n layers per chunk).
std::string global_name(const std::string& name, const GptImpl& stage) {
  const std::string prefix = "layers.";
  if (name.rfind(prefix, 0) != 0) return name;
  const std::size_t dot = name.find('.', prefix.size());
  const int64_t local = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  const int64_t n = stage.layers_per_chunk();
  return prefix + std::to_string(stage.first_layer(static_cast<int>(local / n)) + local % n) +
         name.substr(dot);
}

std::unique_ptr<torch::optim::Optimizer> sgd(const std::vector<at::Tensor>& p) {
  return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.5));
}

struct ParallelRun {
  std::vector<double> losses, norms;                           // per iteration
  std::vector<std::pair<std::string, at::Tensor>> parameters;  // global names
};

ParallelRun run_parallel(const Layout& l, bool sequence_parallel, PipelineSchedule schedule,
                         const SyntheticTokens& data) {
  GptOptions o = tiny();
  o.sequence_parallel = sequence_parallel;
  torch::manual_seed(21);
  GptTaskOptions to;
  to.pipeline = l.pp;
  to.schedule = schedule;
  to.norm_group = l.model_parallel;
  GptTask task(Gpt(o, l.tp, l.pp->stage), data, data, c10::Device(c10::kCPU), to);
  train::LoopOptions lo;
  lo.local_batch_size = kMicro;
  lo.accumulation_steps = kMicroBatches;
  lo.train_batches_per_epoch = 1;  // one iteration per "epoch": a loss per iteration
  lo.max_steps = kSteps;
  lo.validation_every = 0;
  lo.loader_workers = 0;
  lo.make_optimizer = sgd;
  lo.grad_clip_norm = kClip;
  ParallelRun out;
  lo.clip_gradients = [&task, &out](double max_norm, torch::optim::Optimizer& opt) {
    out.norms.push_back(task.clip_gradients(max_norm, &opt).item<double>());
  };
  if (l.p > 1)
    lo.forward_backward = [&task](train::MicroBatchRun& r) { return task.forward_backward(r); };
  lo.finish_gradients = [&task] {
    task.reduce_sequence_parallel_gradients();
    task.reduce_embedding_gradients();
  };
  train::LoopParallelism lp;
  if (l.dp > 1) lp.world = dist::make_tensor_comm(*l.dp_comm, c10::Device(c10::kCPU));
  if (l.t * l.p > 1) lp.replica_comm = l.dp_comm.get();
  const dist::ProcessGrid grid(world().size(), world().rank(), {l.t * l.p, 1, 1}, {2, 3, 4});
  train::TrainingLoop loop(task, lo, c10::Device(c10::kCPU), world(), grid, lp);
  const train::LoopResult result = loop.run(
      [&](const train::LoopEpoch& e) { out.losses.push_back(e.metrics.values[0].second); });
  EXPECT_EQ(result.total_optimizer_steps, kSteps);
  for (const auto& p : task.model()->named_parameters())
    out.parameters.emplace_back(global_name(p.key(), *task.model()), p.value().detach().clone());
  return out;
}

TEST(GptPipelineParallel, EveryLayoutEqualsOneProcessWithTheWholeModelAndBatch) {
  const int world_size = world().size();
  struct Case {
    int t, p;
    bool sequence_parallel;
    int chunks;  // model chunks per rank (> 1: the interleaved schedule)
  };
  int cases_run = 0;
  for (const Case& c :
       {Case{1, 2, false, 1}, Case{1, 2, false, 2}, Case{1, 4, false, 1}, Case{1, 4, false, 2},
        Case{2, 2, false, 1}, Case{2, 2, true, 1}, Case{2, 2, false, 2}}) {
    if (world_size % (c.t * c.p) != 0) continue;
    ++cases_run;
    const Layout l = make_layout(c.t, c.p, c.chunks);
    const std::string what =
        "TP " + std::to_string(c.t) + " x PP " + std::to_string(c.p) + " x DP " +
        std::to_string(l.dp) + (c.sequence_parallel ? " (sequence parallel)" : "") +
        (c.chunks > 1 ? " interleaved, " + std::to_string(c.chunks) + " chunks" : "");
    const SyntheticTokens data(SyntheticTokensOptions{64, kSeq, kVocab, 5, 0});
    const ParallelRun mine =
        run_parallel(l, c.sequence_parallel, PipelineSchedule::kOneForwardOneBackward, data);

    // Reference: the whole model, global batches of consecutive stream samples, torch's clipping.
    const int64_t global_batch = kMicro * kMicroBatches * l.dp;
    torch::manual_seed(21);
    Gpt whole(tiny());
    auto opt = sgd(whole->parameters());
    std::vector<double> ref_losses, ref_norms;
    for (int64_t step = 0; step < kSteps; ++step) {
      std::vector<at::Tensor> rows;
      for (int64_t i = step * global_batch; i < (step + 1) * global_batch; ++i)
        rows.push_back(data.get(static_cast<std::size_t>(i), 0).fields[0]);
      const at::Tensor tokens = at::stack(rows);
      opt->zero_grad();
      const at::Tensor loss =
          whole->token_losses(tokens.narrow(1, 0, kSeq), tokens.narrow(1, 1, kSeq)).mean();
      loss.backward();
      ref_losses.push_back(loss.item<double>());
      ref_norms.push_back(torch::nn::utils::clip_grad_norm_(whole->parameters(), kClip));
      opt->step();
    }
    ASSERT_EQ(mine.losses.size(), ref_losses.size()) << what;
    ASSERT_EQ(mine.norms.size(), ref_norms.size()) << what;
    for (std::size_t i = 0; i < ref_losses.size(); ++i) {
      EXPECT_NEAR(mine.losses[i], ref_losses[i], 1e-5 * ref_losses[i]) << what << " loss " << i;
      EXPECT_NEAR(mine.norms[i], ref_norms[i], 1e-5 * ref_norms[i]) << what << " norm " << i;
      EXPECT_GT(mine.norms[i], kClip) << "clipping engaged";
    }
    // This stage's parameters: its layers, the embeddings on the first stage, the final LayerNorm
    // and the tied embedding's copy on the last.
    const auto ref = whole->named_parameters();
    const int64_t per_stage_layer_params = 12;  // 2 LayerNorms x 2, 4 weights, 4 biases
    std::size_t expected = static_cast<std::size_t>(per_stage_layer_params * kLayers / c.p);
    if (l.pp_rank == 0) expected += 2;                // word and position embeddings
    if (l.pp_rank == c.p - 1) expected += 2;          // final LayerNorm weight and bias
    if (l.pp_rank == c.p - 1 && c.p > 1) ++expected;  // the tied embedding's copy
    EXPECT_EQ(mine.parameters.size(), expected) << what;
    for (const auto& [name, value] : mine.parameters) {
      const at::Tensor* r = ref.find(name);
      ASSERT_NE(r, nullptr) << what << " " << name;
      EXPECT_TRUE(tensors_close(value, slice_of(*r, split_dim(name), c.t, l.tp_rank), 1e-5,
                                what + " " + name));
    }
    // The steps moved the model (a no-op would also "agree" with a no-op reference).
    torch::manual_seed(21);
    Gpt initial(tiny());
    EXPECT_GT((initial->parameters()[0] - whole->parameters()[0]).abs().max().item<double>(), 1e-4);

    // 1F1B (interleaved with chunks) against every forward then every backward: bitwise the same
    // parameters.
    if (c.p > 1) {
      const ParallelRun gpipe =
          run_parallel(l, c.sequence_parallel, PipelineSchedule::kAllForwardAllBackward, data);
      ASSERT_EQ(gpipe.parameters.size(), mine.parameters.size());
      for (std::size_t i = 0; i < mine.parameters.size(); ++i)
        EXPECT_TRUE(at::equal(gpipe.parameters[i].second, mine.parameters[i].second))
            << what << " " << mine.parameters[i].first << ": 1F1B differs from all-forward-first";
    }
  }
  EXPECT_GT(cases_run, 0) << "no layout fits " << world_size << " ranks";
}

}  // namespace
}  // namespace scaffold::llm
