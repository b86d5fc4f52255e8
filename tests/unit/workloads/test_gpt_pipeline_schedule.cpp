// The pipeline schedules (pipeline.hpp) as lists of passes, without ranks: each micro-batch
// once forward and once backward in order, 1F1B's warm-up and in-flight bounds, and a simulation
// of all P stages running their lists (a pass waits for its input from the neighbouring stage)
// that must finish without a deadlock in (m + P - 1)(t_f + t_b), each stage idle for the share
// pipeline_bubble_fraction gives; the GPT split into stages against one process.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/pipeline.hpp"

namespace scaffold::llm {
namespace {

constexpr PipelineSchedule kSchedules[] = {PipelineSchedule::kOneForwardOneBackward,
                                           PipelineSchedule::kAllForwardAllBackward};

TEST(PipelineSchedule, EachMicroBatchRunsForwardThenBackwardOnceInOrder) {
  for (PipelineSchedule s : kSchedules)
    for (int stages : {1, 2, 3, 4, 8})
      for (int64_t m : {1, 2, 3, 4, 7, 16})
        for (int stage = 0; stage < stages; ++stage) {
          const auto ops = pipeline_ops(s, stages, stage, m);
          ASSERT_EQ(ops.size(), static_cast<std::size_t>(2 * m));
          int64_t next_f = 0, next_b = 0, in_flight = 0, most = 0;
          for (const PipelineOp& op : ops) {
            EXPECT_EQ(op.chunk, 0);
            if (op.forward) {
              EXPECT_EQ(op.micro_batch, next_f++);
              most = std::max(most, ++in_flight);
            } else {
              EXPECT_EQ(op.micro_batch, next_b++);
              EXPECT_LT(op.micro_batch, next_f) << "backward before its forward";
              --in_flight;
            }
          }
          // 1F1B bounds the activations kept on stage p to min(P - p, m) micro-batches; GPipe
          // keeps all m.
          EXPECT_EQ(most, s == PipelineSchedule::kOneForwardOneBackward
                              ? std::min<int64_t>(stages - stage, m)
                              : m)
              << to_string(s) << " P " << stages << " p " << stage << " m " << m;
        }
}

// With v model chunks: every (micro-batch, chunk) forward once, then its backward once, each
// chunk's micro-batches in order; interleaved 1F1B keeps at most 2 (P - p - 1) + (v - 1) P + 1
// passes in flight (its warm-up and one), never more than GPipe's v m.
TEST(PipelineSchedule, InterleavedChunksRunEachPassOnceInOrder) {
  for (PipelineSchedule s : kSchedules)
    for (int stages : {2, 3, 4})
      for (int chunks : {2, 3})
        for (int64_t groups : {1, 2, 3})
          for (int stage = 0; stage < stages; ++stage) {
            const int64_t m = groups * stages;
            const auto ops = pipeline_ops(s, stages, stage, m, chunks);
            ASSERT_EQ(ops.size(), static_cast<std::size_t>(2 * m * chunks));
            std::vector<int64_t> next_f(static_cast<std::size_t>(chunks), 0),
                next_b(static_cast<std::size_t>(chunks), 0);
            int64_t in_flight = 0, most = 0;
            for (const PipelineOp& op : ops) {
              ASSERT_GE(op.chunk, 0);
              ASSERT_LT(op.chunk, chunks);
              const auto k = static_cast<std::size_t>(op.chunk);
              if (op.forward) {
                EXPECT_EQ(op.micro_batch, next_f[k]++);
                most = std::max(most, ++in_flight);
              } else {
                EXPECT_EQ(op.micro_batch, next_b[k]++);
                EXPECT_LT(op.micro_batch, next_f[k]) << "backward before its forward";
                --in_flight;
              }
            }
            const int64_t bound =
                s == PipelineSchedule::kOneForwardOneBackward
                    ? std::min<int64_t>(2 * (stages - stage - 1) + (chunks - 1) * stages + 1,
                                        m * chunks)
                    : m * chunks;
            EXPECT_EQ(most, bound) << to_string(s) << " P " << stages << " p " << stage << " v "
                                   << chunks << " m " << m;
          }
  EXPECT_THROW(pipeline_ops(PipelineSchedule::kOneForwardOneBackward, 4, 0, 6, 2), core::Error)
      << "6 micro-batches over 4 stages cannot interleave";
}

TEST(PipelineSchedule, OneForwardOneBackwardStartsWithTheWarmUpForwards) {
  // P 4, m 6, stage 1: 2 warm-up forwards, then F2 B0 F3 B1 F4 B2 F5 B3, then B4 B5.
  const std::vector<PipelineOp> expected = {{true, 0}, {true, 1},  {true, 2},  {false, 0},
                                            {true, 3}, {false, 1}, {true, 4},  {false, 2},
                                            {true, 5}, {false, 3}, {false, 4}, {false, 5}};
  EXPECT_EQ(pipeline_ops(PipelineSchedule::kOneForwardOneBackward, 4, 1, 6), expected);
  // The last stage alternates from the start.
  const auto last = pipeline_ops(PipelineSchedule::kOneForwardOneBackward, 4, 3, 3);
  for (std::size_t i = 0; i < last.size(); ++i) EXPECT_EQ(last[i].forward, i % 2 == 0);
}

// Runs every stage's list: the forward of micro-batch j in virtual stage s (chunk k of rank p,
// s = k P + p) starts once virtual stage s - 1 finished that forward, its backward once virtual
// stage s + 1 finished that backward (the last virtual stage's once its own forward did), each
// rank one pass at a time in its list's order, transfers free, every pass of a chunk taking tf
// (forward) or tb (backward). Returns each rank's finish time; fails the test on a deadlock.
std::vector<double> simulate(PipelineSchedule s, int stages, int64_t m, double tf, double tb,
                             int chunks = 1) {
  std::vector<std::vector<PipelineOp>> lists;
  for (int p = 0; p < stages; ++p) lists.push_back(pipeline_ops(s, stages, p, m, chunks));
  const int virtual_stages = stages * chunks;
  std::map<std::tuple<int, bool, int64_t>, double> done;  // (virtual stage, forward, j) -> end
  std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0);
  std::vector<double> clock(static_cast<std::size_t>(stages), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int p = 0; p < stages; ++p) {
      auto& i = next[static_cast<std::size_t>(p)];
      if (i == lists[static_cast<std::size_t>(p)].size()) continue;
      const PipelineOp op = lists[static_cast<std::size_t>(p)][i];
      const int vs = op.chunk * stages + p;
      const bool needs_peer = op.forward ? vs > 0 : vs < virtual_stages - 1;
      double ready = 0.0;
      if (needs_peer) {
        const auto it = done.find({op.forward ? vs - 1 : vs + 1, op.forward, op.micro_batch});
        if (it == done.end()) continue;  // its input has not arrived yet
        ready = it->second;
      }
      double& c = clock[static_cast<std::size_t>(p)];
      c = std::max(c, ready) + (op.forward ? tf : tb);
      done[{vs, op.forward, op.micro_batch}] = c;
      ++i;
      progress = true;
    }
  }
  for (int p = 0; p < stages; ++p)
    EXPECT_EQ(next[static_cast<std::size_t>(p)], lists[static_cast<std::size_t>(p)].size())
        << "deadlock: stage " << p << " of " << stages << " with " << m << " micro-batches, "
        << chunks << " chunks";
  return clock;
}

TEST(PipelineSchedule, TheSchedulesFinishInTheIdealTimeWithTheBubbleShareIdle) {
  for (PipelineSchedule s : kSchedules)
    for (int stages : {1, 2, 4, 8})
      for (int64_t m : {1, 2, 4, 8, 32})
        for (const auto& [tf, tb] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}}) {
          const std::vector<double> ends = simulate(s, stages, m, tf, tb);
          const double makespan = *std::max_element(ends.begin(), ends.end());
          const auto mm = static_cast<double>(m), pp = static_cast<double>(stages);
          EXPECT_DOUBLE_EQ(makespan, (mm + pp - 1) * (tf + tb))
              << to_string(s) << " P " << stages << " m " << m;
          const double idle = (makespan - mm * (tf + tb)) / makespan;
          EXPECT_NEAR(idle, pipeline_bubble_fraction(stages, m), 1e-12);
        }
  // The formula at a few points, by hand: (P - 1) / (v m + P - 1).
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(2, 8), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(4, 4), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(4, 4, 2), 3.0 / 11.0);
}

// Interleaving: with each chunk's pass taking t/v (the stage's layers split v ways), the ranks run
// their lists without a deadlock and the makespan shrinks towards m (tf + tb) + (P - 1)(tf + tb)
// / v: here it must be at most the ideal with the bubble (P - 1)/(v m + P - 1), and below the
// uninterleaved schedule's.
TEST(PipelineSchedule, InterleavingShrinksTheBubbleWithoutADeadlock) {
  for (int stages : {2, 4})
    for (int chunks : {2, 4})
      for (int64_t groups : {1, 2, 4}) {
        const int64_t m = groups * stages;
        const double tf = 1.0 / chunks, tb = 2.0 / chunks;  // per chunk pass
        const std::vector<double> ends =
            simulate(PipelineSchedule::kOneForwardOneBackward, stages, m, tf, tb, chunks);
        const double makespan = *std::max_element(ends.begin(), ends.end());
        const double work = static_cast<double>(m) * 3.0;  // per rank: m (t_f + t_b)
        const double ideal = work / (1.0 - pipeline_bubble_fraction(stages, m, chunks));
        const double plain = (static_cast<double>(m) + stages - 1) * 3.0;
        EXPECT_LE(makespan, ideal + 1e-9) << "P " << stages << " v " << chunks << " m " << m;
        EXPECT_LT(makespan, plain) << "P " << stages << " v " << chunks << " m " << m;
        // GPipe's chunk-after-chunk order of the same passes also completes.
        simulate(PipelineSchedule::kAllForwardAllBackward, stages, m, tf, tb, chunks);
      }
}

TEST(PipelineSchedule, NamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(parse_pipeline_schedule("1f1b"), PipelineSchedule::kOneForwardOneBackward);
  EXPECT_EQ(parse_pipeline_schedule("gpipe"), PipelineSchedule::kAllForwardAllBackward);
  EXPECT_THROW(parse_pipeline_schedule("interleaved"), std::exception);
}

// The stages of a 4-layer GPT chained by hand in one process equal the whole model: the same
// weights drawn (each stage keeps its own layers), the same losses and gradients.
TEST(GptStages, ChainedStagesEqualTheWholeModel) {
  GptOptions o;
  o.num_layers = 4;
  o.hidden_size = 16;
  o.num_attention_heads = 2;
  o.ffn_hidden_size = 32;
  o.seq_length = 8;
  o.padded_vocab_size = 40;
  o.init_method_std = 0.1;
  torch::manual_seed(3);
  const at::Tensor tokens = at::randint(40, {2, 9}, at::kLong);
  const at::Tensor input = tokens.narrow(1, 0, 8), labels = tokens.narrow(1, 1, 8);
  torch::manual_seed(5);
  Gpt whole(o);
  const at::Tensor ref = whole->token_losses(input, labels);
  ref.sum().backward();
  // (stages, chunks): 2 and 4 stages of contiguous layers; 2 stages of 2 interleaved chunks
  // (rank 0 holds layers 0 and 2, rank 1 layers 1 and 3).
  for (const auto& [stages, chunks] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    const std::string what =
        std::to_string(stages) + " stages of " + std::to_string(chunks) + " chunk(s)";
    std::vector<Gpt> parts;
    for (int p = 0; p < stages; ++p) {
      torch::manual_seed(5);
      parts.emplace_back(o, nullptr, PipelineStage{stages, p, chunks});
    }
    // Virtual stage vs = chunk k of rank vs % P, k = vs / P.
    const int virtual_stages = stages * chunks;
    std::vector<at::Tensor> inputs, outputs;
    for (int vs = 0; vs < virtual_stages; ++vs) {
      inputs.push_back(vs == 0 ? input : outputs.back().detach().requires_grad_(true));
      outputs.push_back(
          parts[static_cast<std::size_t>(vs % stages)]->stage_forward(inputs.back(), vs / stages));
    }
    const at::Tensor losses = parts.back()->losses_from_hidden(outputs.back(), labels);
    EXPECT_TRUE(at::allclose(losses, ref, 1e-6, 1e-6)) << what;
    // Backward stage by stage, the gradient of each stage's input handed to the previous one.
    losses.sum().backward();
    for (int vs = virtual_stages - 1; vs > 0; --vs)
      outputs[static_cast<std::size_t>(vs - 1)].backward(
          inputs[static_cast<std::size_t>(vs)].grad());
    const auto ref_params = whole->named_parameters();
    const int64_t per_chunk = 4 / virtual_stages;
    for (int p = 0; p < stages; ++p) {
      const Gpt& part = parts[static_cast<std::size_t>(p)];
      for (int k = 0; k < chunks; ++k)
        EXPECT_EQ(part->first_layer(k), (k * stages + p) * per_chunk) << what;
      EXPECT_EQ(part->layers->size(), static_cast<std::size_t>(4 / stages));
      EXPECT_EQ(part->word_embeddings.defined(), p == 0 || p == stages - 1);
      EXPECT_EQ(part->position_embeddings.defined(), p == 0);
      for (const auto& named : part->named_parameters()) {
        std::string name = named.key();
        if (name.rfind("layers.", 0) == 0) {
          const std::size_t dot = name.find('.', 7);
          const int64_t local = std::stoll(name.substr(7, dot - 7));
          const auto chunk = static_cast<int>(local / per_chunk);
          name = "layers." + std::to_string(part->first_layer(chunk) + local % per_chunk) +
                 name.substr(dot);
        }
        const at::Tensor* r = ref_params.find(name);
        ASSERT_NE(r, nullptr) << name;
        EXPECT_TRUE(at::equal(named.value(), *r)) << what << ", " << name << " drawn";
        // The tied embedding's gradient is split between its two copies (the pipeline sums them).
        if (name == "word_embeddings") continue;
        EXPECT_TRUE(at::allclose(named.value().grad(), r->grad(), 1e-5, 1e-6))
            << what << ", " << name << " gradient";
      }
    }
    const at::Tensor tied =
        parts.front()->word_embeddings.grad() + parts.back()->word_embeddings.grad();
    EXPECT_TRUE(at::allclose(tied, whole->word_embeddings.grad(), 1e-5, 1e-6)) << what;
  }
}

}  // namespace
}  // namespace scaffold::llm
