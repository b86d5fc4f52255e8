// The FNO columns, declared once. Numbers are rounded here (the same text in every format, as
// JUBE writes CARAML's tables): times to 2 decimals (minutes to 3), parameters in millions to 3,
// sizes and memory in MB (2^20 bytes, as torch's memory reports) to 2, TFLOP to 4, rates to 2,
// the relative L2 error to 5, Wh to 3. Full precision is in `scaffold report --format json`.
#include "workloads/fno/result_columns.hpp"

#include <filesystem>
#include <string>
#include <tuple>

#include "workloads/fno/metrics.hpp"

namespace scaffold::fno {

namespace {

using report::Column;
using report::RunRecord;
using report::cells::counter;
using report::cells::number;
using report::cells::param;
using report::cells::text;

bool eval_row(const RunRecord& r) {
  return param(r, kParamMode) == "eval";
}

// A training figure: empty on eval rows.
std::string train_counter(const RunRecord& r, const char* name, int decimals) {
  return eval_row(r) ? std::string() : counter(r, name, decimals);
}

}  // namespace

std::vector<Column> result_columns() {
  return {
      // CARAML's columns (operator_benchmark/fno_benchmark.yaml), in its order.
      text("JobID", [](const RunRecord& r) { return r.job_id.empty() ? r.run : r.job_id; }),
      text("System", [](const RunRecord& r) { return r.system; }),
      text("Version", [](const RunRecord& r) { return r.scaffold_version; }),
      text("Queue", [](const RunRecord& r) { return r.queue; }),
      number("Nodes", [](const RunRecord& r) { return std::to_string(r.nodes); }),
      number("TotalDevices", [](const RunRecord& r) { return std::to_string(r.devices); }),
      number("DataParallel", [](const RunRecord& r) { return param(r, kParamDataParallel); }),
      number("GridShards", [](const RunRecord& r) { return param(r, kParamGridShards); }),
      text("Problem", [](const RunRecord& r) { return param(r, kParamProblem); }),
      text("Config", [](const RunRecord& r) { return param(r, kParamConfig); }),
      number("ModelParam (Million)",
             [](const RunRecord& r) { return counter(r, kCounterParameters, 3, 1e-6); }),
      number("ModelSize (MB)",
             [](const RunRecord& r) { return counter(r, kCounterModelSizeMb, 2); }),
      text("Grid", [](const RunRecord& r) { return param(r, kParamGrid); }),
      number("GlobalBatchSize", [](const RunRecord& r) { return std::to_string(r.global_batch); }),
      number("LocalBatchSize", [](const RunRecord& r) { return std::to_string(r.local_batch); }),
      // No micro-batching or gradient accumulation here: one micro-batch = the local batch, GAS 1.
      number("MicroBatchSize", [](const RunRecord& r) { return std::to_string(r.local_batch); }),
      number("GAS", [](const RunRecord&) { return std::string("1"); }),
      text("InputShape", [](const RunRecord& r) { return param(r, kParamInputShape); }),
      number("Runtime (min)",
             [](const RunRecord& r) { return report::fixed_text(r.runtime_s / 60.0, 3); }),
      number("Epochs",
             [](const RunRecord& r) {
               return eval_row(r) ? std::string() : std::to_string(r.epochs);
             }),
      text("MixedPrecision", [](const RunRecord& r) { return r.precision; }),
      // The FFTs and the complex weights always run in fp32 (no bf16 FFT in LibTorch 1.13 on CPU).
      text("ComplexMixedPrecision", [](const RunRecord&) { return std::string("fp32"); }),
      // CARAML's torch.compile mode; native C++ compiles nothing at run time.
      text("CompileMode", [](const RunRecord&) { return std::string("native"); }),
      // In eager mode operator_learning's MeanCompileTime is the mean training pass of the epochs
      // after the first; a record written before that counter existed reads 0.00.
      number("MeanCompileTime (s)",
             [](const RunRecord& r) {
               if (eval_row(r)) return std::string("0.00");
               const std::optional<double> x = report::counter_value(r, kCounterMeanCompileTimeS);
               return x ? report::fixed_text(x, 3) : std::string("0.00");
             }),
      number("TrainTime/Epoch (min)",
             [](const RunRecord& r) { return train_counter(r, kCounterTrainTimePerEpochMin, 3); }),
      number("TotalEpochTime (s)",
             [](const RunRecord& r) { return train_counter(r, kCounterTotalEpochTimeS, 2); }),
      number("TotalTrainTime (s)",
             [](const RunRecord& r) { return train_counter(r, kCounterTotalTrainTimeS, 2); }),
      number("TotalComputeTime (s)",
             [](const RunRecord& r) { return train_counter(r, kCounterTotalComputeTimeS, 2); }),
      number("TotalMonitorTime (s)",
             [](const RunRecord& r) { return train_counter(r, kCounterTotalMonitorTimeS, 2); }),
      number("TotalCheckpointTime (s)",
             [](const RunRecord& r) { return train_counter(r, kCounterTotalCheckpointTimeS, 2); }),
      number("Timesteps", [](const RunRecord& r) { return counter(r, kCounterTimesteps, 0); }),
      number("Timesteps/second",
             [](const RunRecord& r) { return counter(r, kCounterTimestepsPerS, 2); }),
      number("TrainTimesteps",
             [](const RunRecord& r) { return train_counter(r, kCounterTrainTimesteps, 0); }),
      number("TrainTimesteps/second",
             [](const RunRecord& r) { return train_counter(r, kCounterTrainTimestepsPerS, 2); }),
      number("PeakFwdMem (MB)",
             [](const RunRecord& r) { return train_counter(r, kCounterPeakFwdMemMb, 2); }),
      number("PersistentMem (MB)",
             [](const RunRecord& r) { return train_counter(r, kCounterPersistentMemMb, 2); }),
      number("ActivationMem (MB)",
             [](const RunRecord& r) { return train_counter(r, kCounterActivationMemMb, 2); }),
      number("TFLOPs",
             [](const RunRecord& r) {
               return eval_row(r) ? counter(r, kCounterEvalTflop, 4)
                                  : counter(r, kCounterTflopPerEpoch, 4);
             }),
      number("Energy/GPU (Wh)",
             [](const RunRecord& r) {
               return report::fixed_text(
                   r.energy_wh ? std::optional<double>(*r.energy_wh / r.devices) : std::nullopt, 3);
             }),
      number("TotalEnergy (Wh)",
             [](const RunRecord& r) { return report::fixed_text(r.energy_wh, 3); }),
      // Ours.
      number("ValRelL2", [](const RunRecord& r) { return train_counter(r, kCounterValRelL2, 5); }),
      number("Timesteps/Wh",
             [](const RunRecord& r) { return counter(r, kCounterTimestepsPerWh, 1); }),
      text("Mode", [](const RunRecord& r) { return param(r, kParamMode); }),
  };
}

bool result_order(const RunRecord& a, const RunRecord& b) {
  const std::string pa = param(a, kParamProblem), pb = param(b, kParamProblem);
  const std::string sa = param(a, kParamGridShards), sb = param(b, kParamGridShards);
  return std::tie(pa, a.devices, sa) < std::tie(pb, b.devices, sb);
}

const std::vector<report::CounterRule>& counter_rules() {
  using Range = report::CounterRange;
  static const std::vector<report::CounterRule> rules{
      {"parameters", Range::kNonNegative},
      {"model_size_mb", Range::kNonNegative},
      {"train_time_per_epoch_min", Range::kNonNegative},
      {"total_epoch_time_s", Range::kNonNegative},
      {"total_train_time_s", Range::kNonNegative},
      {"total_compute_time_s", Range::kNonNegative},
      {"total_monitor_time_s", Range::kNonNegative},
      {"total_checkpoint_time_s", Range::kNonNegative},
      {"timesteps", Range::kNonNegative},
      {"timesteps_per_s", Range::kNonNegative},
      {"train_timesteps", Range::kNonNegative},
      {"train_timesteps_per_s", Range::kNonNegative},
      {"peak_forward_memory_mb", Range::kNonNegative},
      {"persistent_memory_mb", Range::kNonNegative},
      {"activation_memory_mb", Range::kNonNegative},
      {"tflop_per_epoch", Range::kNonNegative},
      {"val_rel_l2", Range::kNonNegative},
      {"train_rel_l2", Range::kNonNegative},
      {"forward_flop_per_example", Range::kNonNegative},
      {"achieved_flop_per_s", Range::kNonNegative},
      {"median_step_s", Range::kNonNegative},
      {"dist_fft_comm_s", Range::kNonNegative},
      {"dist_fft_comm_share", Range::kNonNegative},
      {"dist_fft_bytes", Range::kNonNegative},
      {"timesteps_per_wh", Range::kNonNegative},
      {"eval_forward_s", Range::kNonNegative},
      {"eval_forward_s_mean", Range::kNonNegative},
      {"examples_per_s", Range::kNonNegative},
      {"eval_tflop", Range::kNonNegative},
  };
  return rules;
}

void check_run(const std::filesystem::path& run_dir, const report::RunRecord& record) {
  report::check_counters(record, counter_rules(), (run_dir / report::kSummaryFileName).string());
  const std::filesystem::path csv = run_dir / kEpochStatsFileName;
  // An eval run times forwards only; it has no per-step times to agree with.
  report::check_step_csv(
      csv, record, read_epoch_stats,
      [](const EpochRow& row) { return row.duration_s + row.monitor_s + row.checkpoint_s; },
      !eval_row(record));
}

report::WorkloadTable result_table() {
  return {kWorkloadName, result_columns(), result_order, check_run};
}

}  // namespace scaffold::fno
