// The LLM-training figures against CARAML's published example (4 x GH200 "JEDI", GPT 800M,
// global batch 2048, sequence 2048, 26.52 s per iteration -> 158,152.80 tokens/s and 321.65
// TFLOP/s per GPU; docs/llm.md, 'Metrics'), the TFLOP/s formula on hand-computed numbers,
// Megatron's learning-rate schedule at hand-computed points, the log line against CARAML's JUBE
// patterns, iteration_stats.csv round trip and rejection, and the result table's CARAML column
// titles.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "report/record_table.hpp"
#include "report/run_record.hpp"
#include "test_util.hpp"
#include "workloads/llm_training/metrics.hpp"
#include "workloads/llm_training/result_columns.hpp"

namespace scaffold::llm {
namespace {

GptFlopsModel caraml_800m() {
  GptFlopsModel m;
  m.global_batch = 2048;
  m.seq_length = 2048;
  m.num_layers = 16;
  m.hidden_size = 2048;
  m.padded_vocab = 50304;  // 50257 padded to a multiple of 128
  m.activation_factor = caraml_activation_factor("selective");
  return m;
}

TEST(LlmMetrics, CaramlsPublishedExample) {
  const GptFlopsModel m = caraml_800m();
  EXPECT_EQ(m.activation_factor, 4);
  // The README prints the mean time rounded to 26.52 s; 158,152.80 tokens/s is 2048 x 2048 =
  // 4,194,304 tokens over the unrounded mean, 26.52058 s: within 0.01 % of 26.52's 158,156.26.
  EXPECT_NEAR(tokens_per_s(2048, 2048, 26.52), 158152.80, 158152.80 * 1e-4);
  EXPECT_NEAR(tokens_per_s(2048, 2048, 26.52), 158156.26, 0.01);     // 4194304 / 26.52, by hand
  EXPECT_NEAR(tokens_per_s(2048, 2048, 26.52058), 158152.80, 0.01);  // 4194304 / 26.52058
  // FLOPs per iteration, by hand: 24 x 4 x 2048 x 2048 x 16 x 2048^2 = 2.7021597764222976e16, times
  // (1 + 2048 / (6 x 2048) + 50304 / (16 x 16 x 2048)) = 1.262613932291667: 3.4117845809889e16;
  // over 26.52 s and 4 GPUs 321.624 TFLOP/s, 0.008 % below CARAML's 321.65.
  EXPECT_NEAR(gpt_iteration_flops(m), 3.4117845809889e16, 1e4);
  EXPECT_NEAR(tflops_per_device(m, 26.52, 4), 321.6237, 1e-3);
  // 321.65 TFLOP/s per GPU on 4 GPUs (a mean of per-line values, hence the 0.05 % tolerance);
  // k = 3 would give 241.2, so CARAML counts selective recompute with k = 4.
  EXPECT_NEAR(tflops_per_device(m, 26.52, 4), 321.65, 321.65 * 5e-4);
  GptFlopsModel k3 = m;
  k3.activation_factor = 3;
  EXPECT_NEAR(tflops_per_device(k3, 26.52, 4), 241.2, 0.1);
  // The MI250 example: GBS 32 over 8 GCDs at 0.74 s -> 88,620.76 tokens/s (0.74 is rounded).
  EXPECT_NEAR(tokens_per_s(32, 2048, 0.74), 88620.76, 88620.76 * 1e-3);
}

TEST(LlmMetrics, TflopsFormulaOnHandComputedNumbers) {
  // 24 k B s L h^2 (1 + s/(6h) + V/(16 L h)).
  GptFlopsModel a;
  a.global_batch = 1, a.seq_length = 6, a.num_layers = 1, a.hidden_size = 1, a.padded_vocab = 16,
  a.activation_factor = 3;
  // 24 * 3 * 6 * (1 + 1 + 1) = 1296 FLOPs.
  EXPECT_DOUBLE_EQ(gpt_iteration_flops(a), 1296.0);
  EXPECT_DOUBLE_EQ(tflops_per_device(a, 1.0, 1), 1296e-12);
  GptFlopsModel b;
  b.global_batch = 2, b.seq_length = 12, b.num_layers = 2, b.hidden_size = 3, b.padded_vocab = 96,
  b.activation_factor = 4;
  // 24 * 4 * 2 * 12 * 2 * 9 = 41472; x (1 + 12/18 + 96/96) = 110592; over 0.5 s x 2 devices.
  EXPECT_NEAR(gpt_iteration_flops(b), 110592.0, 1e-9);
  EXPECT_NEAR(tflops_per_device(b, 0.5, 2), 110592e-12, 1e-20);
  EXPECT_EQ(caraml_activation_factor("none"), 3);
  EXPECT_EQ(caraml_activation_factor("full"), 4);
}

TEST(LlmMetrics, MegatronLearningRateSchedule) {
  LrSchedule s;
  s.lr = 1e-4, s.min_lr = 1e-5, s.warmup_samples = 100, s.decay_samples = 1100;
  EXPECT_DOUBLE_EQ(megatron_lr(s, 0), 0.0);
  EXPECT_NEAR(megatron_lr(s, 50), 5e-5, 1e-18);
  EXPECT_NEAR(megatron_lr(s, 100), 1e-4, 1e-18);
  EXPECT_NEAR(megatron_lr(s, 600), 5.5e-5, 1e-15);  // cos(pi/2) = 0
  EXPECT_NEAR(megatron_lr(s, 350), 1e-5 + 0.5 * (std::cos(M_PI / 4) + 1) * 9e-5,
              1e-15);  // 8.682e-5
  EXPECT_NEAR(megatron_lr(s, 1100), 1e-5, 1e-15);
  EXPECT_DOUBLE_EQ(megatron_lr(s, 5000), 1e-5);
  s.style = "linear";
  EXPECT_NEAR(megatron_lr(s, 350), 7.75e-5, 1e-15);
  s.style = "constant";
  EXPECT_NEAR(megatron_lr(s, 5000), 1e-4, 1e-18);
  EXPECT_NEAR(megatron_lr(s, 50), 5e-5, 1e-18) << "the warm-up still applies";
}

// CARAML's JUBE patterns (llm_benchmark_nvidia_amd.yaml) read our log line.
TEST(LlmMetrics, TheLogLineMatchesCaramlsPatterns) {
  IntervalRow r;
  r.iteration = 25;
  r.iterations = 5;
  r.train_s = 132.6;  // 26.52 s per iteration
  r.lm_loss = 7.25;
  r.lr = 9.5e-5;
  r.grad_norm = 1.234;
  r.loss_scale = 65536;
  const std::string line = megatron_log_line(r, 100, caraml_800m(), 4);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(iteration\s+(\d+)/\s*(\d+))"))) << line;
  EXPECT_EQ(m[1], "25");
  EXPECT_EQ(m[2], "100");
  ASSERT_TRUE(
      std::regex_search(line, m, std::regex(R"(elapsed time per iteration \(s\):\s+([0-9.]+))")))
      << line;
  EXPECT_EQ(m[1], "26.5200");
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(TFLOPs:\s+([0-9.]+))"))) << line;
  EXPECT_NEAR(std::stod(m[1]), 321.65, 0.2);
  EXPECT_NE(line.find("consumed samples:        51200 |"), std::string::npos) << line;
  EXPECT_NE(line.find("samples per second: 77.225 |"), std::string::npos) << line;  // 2048 / 26.52
  EXPECT_NE(line.find("lm loss: 7.250000E+00 |"), std::string::npos) << line;
  EXPECT_NE(line.find("learning rate: 9.500E-05 |"), std::string::npos) << line;
}

TEST(LlmMetrics, FiguresExcludeTheWarmupByNameBesideCaramlsMean) {
  // Three intervals of 5 iterations: 10 s (warm-up), 5 s, 6 s per iteration; a deadline leaves a
  // last one of 2 iterations at 4 s each.
  std::vector<IntervalRow> rows(4);
  const double per_it[] = {10, 5, 6, 4};
  const int64_t its[] = {5, 5, 5, 2};
  int64_t iteration = 0;
  for (int i = 0; i < 4; ++i) {
    iteration += its[i];
    rows[i].iteration = iteration;
    rows[i].iterations = its[i];
    rows[i].train_s = per_it[i] * static_cast<double>(its[i]);
    rows[i].warmup = i == 0;
    rows[i].lm_loss = 8.0 - i;
    rows[i].val_loss = i == 2 ? 6.5 : std::numeric_limits<double>::quiet_NaN();
  }
  GptFlopsModel m;
  m.global_batch = 8, m.seq_length = 100, m.num_layers = 2, m.hidden_size = 60,
  m.padded_vocab = 1920;
  m.activation_factor = 4;
  const LlmFigures f = llm_figures(rows, m, 2, 0.5, 2.0);
  EXPECT_EQ(f.iterations, 17);
  EXPECT_DOUBLE_EQ(f.caraml_time_per_iteration_s, (10.0 + 5 + 6 + 4) / 4);  // a mean of the lines
  EXPECT_DOUBLE_EQ(f.caraml_tokens_per_s, 800.0 / 6.25);
  // CARAML's figure is the mean of the lines' TFLOP/s. By hand: FLOPs per iteration with k = 4 are
  // 24*4*8*100*2*3600 = 552,960,000 x (1 + 100/360 + 1920/1920 = 41/18) = 1,259,520,000; per line
  // over its seconds per iteration x 2 devices: 6.2976e-5 (10 s), 1.25952e-4 (5 s), 1.0496e-4
  // (6 s), 1.5744e-4 (4 s) TFLOP/s; their mean 1.12832e-4.
  EXPECT_NEAR(f.caraml_tflops_per_device, 1.12832e-4, 1e-15);
  EXPECT_EQ(f.timed_iterations, 12);
  EXPECT_DOUBLE_EQ(f.timed_s, 25.0 + 30.0 + 8.0);
  EXPECT_DOUBLE_EQ(f.time_per_iteration_s, 63.0 / 12);
  EXPECT_DOUBLE_EQ(f.tokens_per_s, 800.0 / (63.0 / 12));
  // Model FLOPs per iteration with k = 3, by hand: 24*3*8*100*2*3600 = 414,720,000 x 41/18 =
  // 944,640,000; over 63/12 = 5.25 s per iteration and 2 devices: 8.9965714e-5 TFLOP/s each, and
  // an MFU of 1.7993143e-4 against the 0.5 TFLOP/s peak.
  EXPECT_NEAR(f.model_tflops_per_device, 8.99657142857e-5, 1e-15);
  ASSERT_TRUE(f.mfu.has_value());
  EXPECT_NEAR(*f.mfu, 1.79931428571e-4, 1e-14);
  ASSERT_TRUE(f.tokens_per_wh && f.j_per_token);
  EXPECT_DOUBLE_EQ(*f.tokens_per_wh, 12 * 800 / 2.0);
  EXPECT_DOUBLE_EQ(*f.j_per_token, 2.0 * 3600 / (12 * 800));
  EXPECT_DOUBLE_EQ(f.lm_loss, 5.0);
  ASSERT_TRUE(f.val_loss.has_value());
  EXPECT_DOUBLE_EQ(*f.val_loss, 6.5);
  EXPECT_THROW(llm_figures({}, m, 1, std::nullopt, std::nullopt), core::Error);
}

TEST(LlmMetrics, IterationStatsRoundTripAndRejectBadRows) {
  test::TempDir dir;
  const auto file = dir.path() / kIterationStatsFileName;
  IntervalRow a;
  a.iteration = 5, a.iterations = 5, a.warmup = true, a.train_s = 2.5, a.lm_loss = 10.9,
  a.lr = 1e-5;
  a.val_loss = std::numeric_limits<double>::quiet_NaN();
  IntervalRow b = a;
  b.iteration = 10, b.warmup = false, b.val_loss = 10.5, b.skipped = 1, b.grad_norm = 0.75;
  std::ofstream(file) << iteration_stats_header() << "\n"
                      << iteration_stats_line(a) << "\n"
                      << iteration_stats_line(b) << "\n";
  const auto rows = read_iteration_stats(file);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].warmup);
  EXPECT_TRUE(std::isnan(rows[0].val_loss));
  EXPECT_DOUBLE_EQ(rows[1].val_loss, 10.5);
  EXPECT_DOUBLE_EQ(rows[1].time_per_iteration_s(), 0.5);
  EXPECT_EQ(rows[1].skipped, 1);
  EXPECT_DOUBLE_EQ(rows[1].grad_norm, 0.75);
  b.iteration = 12;  // does not follow 5 by 5
  std::ofstream(file) << iteration_stats_header() << "\n"
                      << iteration_stats_line(a) << "\n"
                      << iteration_stats_line(b) << "\n";
  try {
    read_iteration_stats(file);
    ADD_FAILURE() << "accepted a gap";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

TEST(LlmMetrics, ResultTableHasCaramlsColumnsInOrder) {
  report::RunRecord r;
  r.workload = kWorkloadName;
  r.status = report::kStatusCompleted;
  r.run = "llm_training_x";
  r.runtime_s = 90;
  r.devices = 4;
  r.global_batch = 2048;
  r.params = {{kParamModel, "GPT"},         {kParamModelSize, "800M"},
              {kParamDataset, "synthetic"}, {kParamPipelineParallel, "1"},
              {kParamTensorParallel, "1"},  {kParamDataParallel, "4"}};
  r.counters = {{kCounterIterations, 25, "", ""},
                {kCounterTimePerIteration, 26.52, "s", ""},
                {kCounterTokensPerS, 158152.8, "tokens/s", ""},
                {kCounterTflopsPerDevice, 321.65, "TFLOP/s", ""},
                {kCounterMfu, 0.325, "", ""}};
  const std::string csv = report::format_workload_table(result_table(), {r}, "csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(
      header.substr(0, 199),
      std::string(
          "JobID,System,Version,Queue,JobTime,Runtime(min),Model,ModelSize,Dataset,Nodes,Devices,"
          "GlobalBatchSize,PipelineParallel,TensorParallel,DataParallel,Iterations,Time/"
          "iteration(s),"
          "Tokens/second,Avg_TFLOPs/GPU,")
          .substr(0, 199));
  EXPECT_NE(csv.find(",1.50,GPT,800M,synthetic,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",2048,1,1,4,25,26.5200,158152.80,321.65,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",32.50,"), std::string::npos) << "MFU in percent\n" << csv;
}

}  // namespace
}  // namespace scaffold::llm
