// LLM training's result table: CARAML's CSV columns for its Megatron GPT benchmark
// (docs/reports.md), titled exactly as CARAML titles them, then ours (the steady figures with the
// warm-up excluded by name, MFU, energy), all read from a report::RunRecord. Also the names of the
// counters and parameters the workload records for them. No LibTorch: `scaffold report` links it.
#pragma once

#include <filesystem>
#include <vector>

#include "report/record_table.hpp"
#include "report/run_record.hpp"

namespace scaffold::llm {

inline constexpr const char* kWorkloadName = "llm_training";  // RunRecord::workload

// Counters the columns read (RunRecord::counters). Definitions: docs/reports.md, docs/llm.md.
inline constexpr const char* kCounterIterations = "iterations";  // the last iteration
inline constexpr const char* kCounterTimePerIteration =
    "time_per_iteration_s";                                        // CARAML: mean of log lines
inline constexpr const char* kCounterTokensPerS = "tokens_per_s";  // CARAML: B s / that mean
inline constexpr const char* kCounterTflopsPerDevice =
    "tflops_per_device";  // CARAML: mean of log lines
inline constexpr const char* kCounterSteadyTimePerIteration = "steady_time_per_iteration_s";
inline constexpr const char* kCounterSteadyTokensPerS = "steady_tokens_per_s";
inline constexpr const char* kCounterSteadyTflopsPerDevice = "steady_tflops_per_device";
inline constexpr const char* kCounterMfu = "mfu";  // fraction in [0, 1]
inline constexpr const char* kCounterTokensPerWh = "tokens_per_wh";
inline constexpr const char* kCounterJPerToken = "j_per_token";

// Parameters the columns read (RunRecord::params), as text.
inline constexpr const char* kParamModel = "model";           // "GPT"
inline constexpr const char* kParamModelSize = "model_size";  // the preset, or "custom"
inline constexpr const char* kParamDataset = "dataset";       // "synthetic" or the data_path's name
inline constexpr const char* kParamJobTime =
    "job_time";  // the scheduler's limit (SCAFFOLD_JOB_TIME)
inline constexpr const char* kParamPipelineParallel = "pipeline_parallel";
inline constexpr const char* kParamTensorParallel = "tensor_parallel";
inline constexpr const char* kParamDataParallel = "data_parallel";
inline constexpr const char* kParamRecompute = "recompute";

// The columns, in order: JobID, System, Version, Queue, JobTime, Runtime(min), Model, ModelSize,
// Dataset, Nodes, Devices, GlobalBatchSize, PipelineParallel, TensorParallel, DataParallel,
// Iterations, Time/iteration(s), Tokens/second, Avg_TFLOPs/GPU, then Precision, Recompute,
// SteadyTime/iteration(s), SteadyTokens/second, SteadyTFLOPs/device, MFU(%), Energy(Wh),
// Tokens/Wh, J/token.
std::vector<report::Column> result_columns();

// CARAML's row order: by devices, then nodes, then global batch size.
bool result_order(const report::RunRecord& a, const report::RunRecord& b);

// The range of every counter the workload writes (docs/reports.md, "What is checked").
const std::vector<report::CounterRule>& counter_rules();

// WorkloadTable::check: counter_rules() over the record, then, when the folder holds it, its
// per-step CSV read strictly and checked against the record (timed rows and their time).
void check_run(const std::filesystem::path& run_dir, const report::RunRecord& record);

// {kWorkloadName, result_columns(), result_order, check_run}.
report::WorkloadTable result_table();

}  // namespace scaffold::llm
