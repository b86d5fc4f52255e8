// The image-classification columns, declared once. Numbers are rounded here (the same text in
// every format, as JUBE writes CARAML's tables): rates and percentages to 2 decimals, Wh to 3,
// images/Wh to 1, J/image to 4. Full precision is in `scaffold report --format json`.
#include "workloads/image_classification/result_columns.hpp"

#include <filesystem>
#include <string>
#include <tuple>

#include "workloads/image_classification/metrics.hpp"

namespace scaffold::imgcls {

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
      // CARAML's columns (image_classification_torch_benchmark.xml), in its order.
      text("JobID", [](const RunRecord& r) { return r.job_id.empty() ? r.run : r.job_id; }),
      text("System", [](const RunRecord& r) { return r.system; }),
      text("Version", [](const RunRecord& r) { return r.scaffold_version; }),
      text("Queue", [](const RunRecord& r) { return r.queue; }),
      number("Runtime(s)", [](const RunRecord& r) { return report::fixed_text(r.runtime_s, 2); }),
      text("Model", [](const RunRecord& r) { return param(r, kParamModel); }),
      text("Dataset", [](const RunRecord& r) { return param(r, kParamDataset); }),
      number("Nodes", [](const RunRecord& r) { return std::to_string(r.nodes); }),
      number("Devices", [](const RunRecord& r) { return std::to_string(r.devices); }),
      number("Tasks/Node", [](const RunRecord& r) { return std::to_string(r.tasks_per_node); }),
      number("Threads/Task", [](const RunRecord& r) { return std::to_string(r.threads_per_task); }),
      number("Workers", [](const RunRecord& r) { return param(r, kParamWorkers); }),
      number("GlobalBatchSize", [](const RunRecord& r) { return std::to_string(r.global_batch); }),
      number("BatchSize/Device", [](const RunRecord& r) { return std::to_string(r.local_batch); }),
      number("Epoch", [](const RunRecord& r) { return std::to_string(r.epochs); }),
      text("Precision", [](const RunRecord& r) { return r.precision; }),
      // CARAML's TorchScript/inductor choice; this is native C++ with nothing to compile.
      text("Compiler", [](const RunRecord&) { return std::string("native"); }),
      text("CompilerMode", [](const RunRecord&) { return std::string("-"); }),
      text("ChannelLast", [](const RunRecord& r) { return param(r, kParamChannelsLast); }),
      number("Images/second", [](const RunRecord& r) { return counter(r, kCounterImagesPerS, 2); }),
      // Ours.
      // What TF32 did: cudnn (CARAML's fp32, fp16, bf16), cudnn+cublas (tf32), off (tf32: 0), or
      // none(cpu) where there is no TF32.
      text("TF32", [](const RunRecord& r) { return param(r, kParamTf32Effect); }),
      number("TrainImages/second",
             [](const RunRecord& r) { return counter(r, kCounterTrainImagesPerS, 2); }),
      number("Top1(%)", [](const RunRecord& r) { return counter(r, kCounterValTop1, 2, 100.0); }),
      number("Top5(%)", [](const RunRecord& r) { return counter(r, kCounterValTop5, 2, 100.0); }),
      number("Energy(Wh)", [](const RunRecord& r) { return report::fixed_text(r.energy_wh, 3); }),
      number("Images/Wh", [](const RunRecord& r) { return counter(r, kCounterImagesPerWh, 1); }),
      number("J/image", [](const RunRecord& r) { return counter(r, kCounterJPerImage, 4); }),
  };
}

bool result_order(const RunRecord& a, const RunRecord& b) {
  return std::tie(a.devices, a.nodes, a.global_batch) <
         std::tie(b.devices, b.nodes, b.global_batch);
}

const std::vector<report::CounterRule>& counter_rules() {
  using Range = report::CounterRange;
  static const std::vector<report::CounterRule> rules{
      {"images_per_s", Range::kNonNegative},
      {"images_per_s_median", Range::kNonNegative},
      {"images_per_s_min", Range::kNonNegative},
      {"images_per_s_max", Range::kNonNegative},
      {"train_images_per_s", Range::kNonNegative},
      {"val_top1", Range::kFraction},
      {"val_top5", Range::kFraction},
      {"parameters", Range::kNonNegative},
      {"forward_flop_per_image", Range::kNonNegative},
      {"achieved_flop_per_s", Range::kNonNegative},
      {"median_step_s", Range::kNonNegative},
      {"skipped_steps", Range::kNonNegative},
      {"images_per_wh", Range::kNonNegative},
      {"j_per_image", Range::kNonNegative},
  };
  return rules;
}

void check_run(const std::filesystem::path& run_dir, const report::RunRecord& record) {
  report::check_counters(record, counter_rules(), (run_dir / report::kSummaryFileName).string());
  const std::filesystem::path csv = run_dir / kEpochStatsFileName;
  report::check_step_csv(csv, record, read_epoch_stats,
                         [](const EpochRow& row) { return row.duration_s; });
}

report::WorkloadTable result_table() {
  return {kWorkloadName, result_columns(), result_order, check_run};
}

}  // namespace scaffold::imgcls
