// The LLM-training columns, declared once. Numbers are rounded here (the same text in every
// format): seconds per iteration to 4 decimals, rates, TFLOP/s and percentages to 2, Wh to 3,
// tokens/Wh to 1, J/token to 6. Full precision is in `scaffold report --format json`.
#include "workloads/llm_training/result_columns.hpp"

#include <filesystem>
#include <string>
#include <tuple>

#include "workloads/llm_training/metrics.hpp"

namespace scaffold::llm {

namespace {

using report::Column;
using report::RunRecord;
using report::cells::counter;
using report::cells::number;
using report::cells::param;
using report::cells::text;

}  // namespace

std::vector<Column> result_columns() {
  return {
      // CARAML's columns (llm_benchmark_nvidia_amd.yaml), in its order.
      text("JobID", [](const RunRecord& r) { return r.job_id.empty() ? r.run : r.job_id; }),
      text("System", [](const RunRecord& r) { return r.system; }),
      text("Version", [](const RunRecord& r) { return r.scaffold_version; }),
      text("Queue", [](const RunRecord& r) { return r.queue; }),
      text("JobTime", [](const RunRecord& r) { return param(r, kParamJobTime); }),
      number("Runtime(min)",
             [](const RunRecord& r) { return report::fixed_text(r.runtime_s / 60.0, 2); }),
      text("Model", [](const RunRecord& r) { return param(r, kParamModel); }),
      text("ModelSize", [](const RunRecord& r) { return param(r, kParamModelSize); }),
      text("Dataset", [](const RunRecord& r) { return param(r, kParamDataset); }),
      number("Nodes", [](const RunRecord& r) { return std::to_string(r.nodes); }),
      number("Devices", [](const RunRecord& r) { return std::to_string(r.devices); }),
      number("GlobalBatchSize", [](const RunRecord& r) { return std::to_string(r.global_batch); }),
      number("PipelineParallel",
             [](const RunRecord& r) { return param(r, kParamPipelineParallel); }),
      number("TensorParallel", [](const RunRecord& r) { return param(r, kParamTensorParallel); }),
      number("DataParallel", [](const RunRecord& r) { return param(r, kParamDataParallel); }),
      number("Iterations", [](const RunRecord& r) { return counter(r, kCounterIterations, 0); }),
      number("Time/iteration(s)",
             [](const RunRecord& r) { return counter(r, kCounterTimePerIteration, 4); }),
      number("Tokens/second", [](const RunRecord& r) { return counter(r, kCounterTokensPerS, 2); }),
      number("Avg_TFLOPs/GPU",
             [](const RunRecord& r) { return counter(r, kCounterTflopsPerDevice, 2); }),
      // Ours.
      text("Precision", [](const RunRecord& r) { return r.precision; }),
      text("Recompute", [](const RunRecord& r) { return param(r, kParamRecompute); }),
      number("SteadyTime/iteration(s)",
             [](const RunRecord& r) { return counter(r, kCounterSteadyTimePerIteration, 4); }),
      number("SteadyTokens/second",
             [](const RunRecord& r) { return counter(r, kCounterSteadyTokensPerS, 2); }),
      number("SteadyTFLOPs/device",
             [](const RunRecord& r) { return counter(r, kCounterSteadyTflopsPerDevice, 2); }),
      number("MFU(%)", [](const RunRecord& r) { return counter(r, kCounterMfu, 2, 100.0); }),
      number("Energy(Wh)", [](const RunRecord& r) { return report::fixed_text(r.energy_wh, 3); }),
      number("Tokens/Wh", [](const RunRecord& r) { return counter(r, kCounterTokensPerWh, 1); }),
      number("J/token", [](const RunRecord& r) { return counter(r, kCounterJPerToken, 6); }),
  };
}

bool result_order(const RunRecord& a, const RunRecord& b) {
  return std::tie(a.devices, a.nodes, a.global_batch) <
         std::tie(b.devices, b.nodes, b.global_batch);
}

const std::vector<report::CounterRule>& counter_rules() {
  using Range = report::CounterRange;
  static const std::vector<report::CounterRule> rules{
      {"iterations", Range::kNonNegative},
      {"time_per_iteration_s", Range::kNonNegative},
      {"tokens_per_s", Range::kNonNegative},
      {"tflops_per_device", Range::kNonNegative},
      {"steady_time_per_iteration_s", Range::kNonNegative},
      {"steady_tokens_per_s", Range::kNonNegative},
      {"steady_tflops_per_device", Range::kNonNegative},
      {"model_tflops_per_device", Range::kNonNegative},
      {"mfu", Range::kNonNegative},
      {"lm_loss", Range::kNonNegative},
      {"val_loss", Range::kNonNegative},
      {"tokens_per_wh", Range::kNonNegative},
      {"j_per_token", Range::kNonNegative},
      {"median_iteration_s", Range::kNonNegative},
      {"gradient_wait_s", Range::kNonNegative},
      {"tensor_parallel_comm_s", Range::kNonNegative},
      {"skipped_steps", Range::kNonNegative},
      {"parameters", Range::kNonNegative},
      {"peak_tflops_per_device", Range::kNonNegative},
      {"table_peak_tflops_per_device", Range::kNonNegative},
  };
  return rules;
}

void check_run(const std::filesystem::path& run_dir, const report::RunRecord& record) {
  report::check_counters(record, counter_rules(), (run_dir / report::kSummaryFileName).string());
  const std::filesystem::path csv = run_dir / kIterationStatsFileName;
  report::check_step_csv(csv, record, read_iteration_stats,
                         [](const IntervalRow& row) { return row.train_s; });
}

report::WorkloadTable result_table() {
  return {kWorkloadName, result_columns(), result_order, check_run};
}

}  // namespace scaffold::llm
