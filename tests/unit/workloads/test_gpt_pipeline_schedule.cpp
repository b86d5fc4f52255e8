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

// Runs every stage's list: a forward of micro-batch j on stage p starts once stage p - 1 finished
// that forward, a backward once stage p + 1 finished that backward (the last stage's once its own
// forward did), each stage one pass at a time in its list's order, transfers free. Returns each
// stage's finish time; fails the test on a deadlock.
std::vector<double> simulate(PipelineSchedule s, int stages, int64_t m, double tf, double tb) {
  std::vector<std::vector<PipelineOp>> lists;
  for (int p = 0; p < stages; ++p) lists.push_back(pipeline_ops(s, stages, p, m));
  std::map<std::tuple<int, bool, int64_t>, double> done;  // (stage, forward, j) -> end time
  std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0);
  std::vector<double> clock(static_cast<std::size_t>(stages), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int p = 0; p < stages; ++p) {
      auto& i = next[static_cast<std::size_t>(p)];
      if (i == lists[static_cast<std::size_t>(p)].size()) continue;
      const PipelineOp op = lists[static_cast<std::size_t>(p)][i];
      const bool needs_peer = op.forward ? p > 0 : p < stages - 1;
      double ready = 0.0;
      if (needs_peer) {
        const auto it = done.find({op.forward ? p - 1 : p + 1, op.forward, op.micro_batch});
        if (it == done.end()) continue;  // its input has not arrived yet
        ready = it->second;
      }
      double& c = clock[static_cast<std::size_t>(p)];
      c = std::max(c, ready) + (op.forward ? tf : tb);
      done[{p, op.forward, op.micro_batch}] = c;
      ++i;
      progress = true;
    }
  }
  for (int p = 0; p < stages; ++p)
    EXPECT_EQ(next[static_cast<std::size_t>(p)], lists[static_cast<std::size_t>(p)].size())
        << "deadlock: stage " << p << " of " << stages << " with " << m << " micro-batches";
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
  // The formula at a few points, by hand: (P - 1) / (m + P - 1).
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(2, 8), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(4, 4), 3.0 / 7.0);
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
  for (int stages : {2, 4}) {
    std::vector<Gpt> parts;
    for (int p = 0; p < stages; ++p) {
      torch::manual_seed(5);
      parts.emplace_back(o, nullptr, PipelineStage{stages, p});
    }
    std::vector<at::Tensor> inputs, outputs;
    for (int p = 0; p < stages; ++p) {
      inputs.push_back(p == 0 ? input : outputs.back().detach().requires_grad_(true));
      outputs.push_back(parts[static_cast<std::size_t>(p)]->stage_forward(inputs.back()));
    }
    const at::Tensor losses = parts.back()->losses_from_hidden(outputs.back(), labels);
    EXPECT_TRUE(at::allclose(losses, ref, 1e-6, 1e-6)) << stages << " stages";
    // Backward stage by stage, the gradient of each stage's input handed to the previous one.
    losses.sum().backward();
    for (int p = stages - 1; p > 0; --p)
      outputs[static_cast<std::size_t>(p - 1)].backward(inputs[static_cast<std::size_t>(p)].grad());
    const auto ref_params = whole->named_parameters();
    for (int p = 0; p < stages; ++p) {
      const Gpt& part = parts[static_cast<std::size_t>(p)];
      EXPECT_EQ(part->first_layer(), p * 4 / stages);
      EXPECT_EQ(part->layers->size(), static_cast<std::size_t>(4 / stages));
      EXPECT_EQ(part->word_embeddings.defined(), p == 0 || p == stages - 1);
      EXPECT_EQ(part->position_embeddings.defined(), p == 0);
      for (const auto& named : part->named_parameters()) {
        std::string name = named.key();
        if (name.rfind("layers.", 0) == 0) {
          const std::size_t dot = name.find('.', 7);
          name = "layers." +
                 std::to_string(part->first_layer() + std::stoll(name.substr(7, dot - 7))) +
                 name.substr(dot);
        }
        const at::Tensor* r = ref_params.find(name);
        ASSERT_NE(r, nullptr) << name;
        EXPECT_TRUE(at::equal(named.value(), *r)) << stages << " stages, " << name << " drawn";
        // The tied embedding's gradient is split between its two copies (the pipeline sums them).
        if (name == "word_embeddings") continue;
        EXPECT_TRUE(at::allclose(named.value().grad(), r->grad(), 1e-5, 1e-6))
            << stages << " stages, " << name << " gradient";
      }
    }
    const at::Tensor tied =
        parts.front()->word_embeddings.grad() + parts.back()->word_embeddings.grad();
    EXPECT_TRUE(at::allclose(tied, whole->word_embeddings.grad(), 1e-5, 1e-6));
  }
}

}  // namespace
}  // namespace scaffold::llm
