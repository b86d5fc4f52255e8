// The LLM-training figures exactly as CARAML computes them (docs/llm.md), plus ours:
// Megatron's learning-rate schedule over samples; the CARAML patch's model TFLOP/s per device,
// 24 k B s L h^2 (1 + s/(6h) + V/(16 L h)) / (t devices 1e12) with k = 4 under activation
// recompute (selective or full) and 3 without; tokens/s = B s / t. Per log interval rows
// (iteration_stats.csv) give CARAML's figures (means over every log line, warm-up included) and
// our steady ones (the timed window after timing_warmup_iters, excluded by name): time per
// iteration, tokens/s, TFLOP/s, MFU against a measured peak, tokens/Wh and J/token. No LibTorch:
// `scaffold report` and the tests use it on plain numbers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/step_csv.hpp"

namespace scaffold::llm {

inline constexpr const char* kIterationStatsFileName = "iteration_stats.csv";

// Megatron's OptimizerParamScheduler with sample-based warm-up and decay: linear from 0 to lr
// over warmup_samples, then cosine/linear to min_lr at decay_samples, min_lr after; constant: lr
// after the warm-up.
struct LrSchedule {
  double lr = 1e-4, min_lr = 1e-5;
  int64_t warmup_samples = 0, decay_samples = 0;
  std::string style = "cosine";  // cosine | linear | constant
};
// The learning rate after `samples` consumed (Megatron's get_lr with num_steps = samples).
double megatron_lr(const LrSchedule& schedule, int64_t samples);

// The model's size as the FLOP formula reads it.
struct GptFlopsModel {
  int64_t global_batch = 0;   // B
  int64_t seq_length = 0;     // s
  int64_t num_layers = 0;     // L
  int64_t hidden_size = 0;    // h
  int64_t padded_vocab = 0;   // V
  int activation_factor = 3;  // k: 3 = forward + backward, 4 = with recomputed activations
};
// The CARAML patch's k: 4 when activations are recomputed (selective or full, as CARAML's
// published 800M numbers need), else 3.
int caraml_activation_factor(const std::string& recompute_granularity);
// FLOPs of one iteration: 24 k B s L h^2 (1 + s/(6h) + V/(16 L h)).
double gpt_iteration_flops(const GptFlopsModel& m);
// Per device: gpt_iteration_flops / (t * devices * 1e12).
double tflops_per_device(const GptFlopsModel& m, double time_per_iteration_s, int devices);
// B s / t.
double tokens_per_s(int64_t global_batch, int64_t seq_length, double time_per_iteration_s);

// One log interval: a row of iteration_stats.csv and one Megatron log line.
struct IntervalRow {
  int64_t iteration = 0;   // the last iteration of the interval (1-based)
  int64_t iterations = 0;  // iterations in it (log_interval; fewer at a deadline or the cap)
  bool warmup = false;     // within timing_warmup_iters: in no steady figure
  double train_s = 0.0;    // wall time of its training (validation excluded, as Megatron's timer)
  double lm_loss = 0.0;    // mean training loss over its tokens
  double val_loss = 0.0;   // NaN when there was no validation after it
  double lr = 0.0;         // the learning rate after its last iteration (Megatron's log)
  double grad_norm = 0.0;  // of its last iteration, before clipping
  double loss_scale = 1.0;
  int64_t skipped = 0;  // iterations the fp16 loss scaler skipped in it
  double time_per_iteration_s() const {
    return iterations > 0 ? train_s / static_cast<double>(iterations) : 0.0;
  }
};

// The columns of iteration_stats.csv, declared once: its header, lines and reader follow from them.
const report::StepCsvColumns<IntervalRow>& iteration_stats_columns();
std::string iteration_stats_header();
std::string iteration_stats_line(const IntervalRow& row);
// Parses iteration_stats.csv; a different header or a malformed row is a core::FileError naming
// the file and line.
std::vector<IntervalRow> read_iteration_stats(const std::filesystem::path& path);

// Megatron's log line with CARAML's additions, the fields its JUBE patterns parse:
// " iteration   N/   M | consumed samples: ... | elapsed time per iteration (s): X | learning
// rate: ... | global batch size: ... | lm loss: ... | loss scale: ... | grad norm: ... | number of
// skipped iterations: ... | samples per second: ... | tokens per second: ... | TFLOPs: Y |"
std::string megatron_log_line(const IntervalRow& row, int64_t train_iters, const GptFlopsModel& m,
                              int devices);

struct LlmFigures {
  // CARAML's (JUBE's analyser): over every log line, warm-up included.
  int64_t iterations = 0;                    // the last iteration reached
  double caraml_time_per_iteration_s = 0.0;  // mean of the lines' elapsed time per iteration
  double caraml_tokens_per_s = 0.0;          // B s / that mean
  double caraml_tflops_per_device = 0.0;     // mean of the lines' TFLOPs
  // Ours: the timed window (rows not marked warm-up).
  int64_t timed_iterations = 0;
  double timed_s = 0.0;
  double time_per_iteration_s = 0.0;  // timed_s / timed_iterations
  double tokens_per_s = 0.0;
  double tflops_per_device = 0.0;        // the CARAML formula at the steady time per iteration
  double model_tflops_per_device = 0.0;  // the same with k = 3 (no recompute counted)
  std::optional<double> mfu;             // model_tflops_per_device / peak
  std::optional<double> tokens_per_wh, j_per_token;
  double lm_loss = 0.0;            // of the last row
  std::optional<double> val_loss;  // of the last row with a validation
};

// `rows`: every interval in order; `peak_tflops_per_device` and `energy_wh` (the timed window's)
// when known. Throws core::Error when there is no row.
LlmFigures llm_figures(const std::vector<IntervalRow>& rows, const GptFlopsModel& m, int devices,
                       std::optional<double> peak_tflops_per_device,
                       std::optional<double> energy_wh);

// Dense bf16/fp16 tensor-core peaks per device from the vendors' data sheets (TFLOP/s), for
// the accelerators CARAML runs on; a cross-check of the measured peak. nullopt when the name is
// not in the table or the precision is fp32.
std::optional<double> table_peak_tflops(const std::string& device_name,
                                        const std::string& precision);

}  // namespace scaffold::llm
