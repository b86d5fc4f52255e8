// The FNO's result table: CARAML's columns for its operator benchmark,
// titled exactly as CARAML titles them, in its order, then ours (the held-out relative L2 error,
// timesteps per Wh, the mode), all read from a report::RunRecord. CARAML's particle columns
// (PIC problems) have no counterpart here; its ParticleShards is our GridShards (tp_size). Train
// rows leave InputShape empty; eval rows (CARAML's `eval`) leave the training columns empty. Also
// the names of the counters and parameters the workload records for them. No LibTorch here.
#pragma once

#include <filesystem>
#include <vector>

#include "report/record_table.hpp"
#include "report/run_record.hpp"

namespace scaffold::fno {

inline constexpr const char* kWorkloadName = "fno";  // RunRecord::workload

// Counters (RunRecord::counters), over the timed epochs (warm-up excluded). docs/reports.md.
inline constexpr const char* kCounterParameters = "parameters";
inline constexpr const char* kCounterModelSizeMb = "model_size_mb";
inline constexpr const char* kCounterTrainTimePerEpochMin = "train_time_per_epoch_min";
// operator_learning's eager MeanCompileTime (the mean training pass after the first epoch).
inline constexpr const char* kCounterMeanCompileTimeS = "mean_compile_time_s";
inline constexpr const char* kCounterTotalEpochTimeS = "total_epoch_time_s";
inline constexpr const char* kCounterTotalTrainTimeS = "total_train_time_s";
inline constexpr const char* kCounterTotalComputeTimeS = "total_compute_time_s";
inline constexpr const char* kCounterTotalMonitorTimeS = "total_monitor_time_s";
inline constexpr const char* kCounterTotalCheckpointTimeS = "total_checkpoint_time_s";
inline constexpr const char* kCounterTimesteps = "timesteps";
inline constexpr const char* kCounterTimestepsPerS = "timesteps_per_s";  // the headline
inline constexpr const char* kCounterTrainTimesteps = "train_timesteps";
inline constexpr const char* kCounterTrainTimestepsPerS = "train_timesteps_per_s";
inline constexpr const char* kCounterPeakFwdMemMb = "peak_forward_memory_mb";
inline constexpr const char* kCounterPersistentMemMb = "persistent_memory_mb";
inline constexpr const char* kCounterActivationMemMb = "activation_memory_mb";
inline constexpr const char* kCounterTflopPerEpoch = "tflop_per_epoch";
inline constexpr const char* kCounterValRelL2 = "val_rel_l2";
inline constexpr const char* kCounterTimestepsPerWh = "timesteps_per_wh";
inline constexpr const char* kCounterEvalTflop = "eval_tflop";  // eval: FLOPs of the timed forwards

// Parameters (RunRecord::params), as text.
inline constexpr const char* kParamProblem = "problem";  // "rbc2d"
inline constexpr const char* kParamConfig = "config";    // the first -c file's name
inline constexpr const char* kParamGrid = "grid";        // "256x64"
inline constexpr const char* kParamDataParallel = "data_parallel";
inline constexpr const char* kParamGridShards = "tp_size";
inline constexpr const char* kParamMode = "mode";               // "train" | "eval"
inline constexpr const char* kParamInputShape = "input_shape";  // eval: "[20, 4, 256, 64]"

// The columns, in order: JobID, System, Version, Queue, Nodes, TotalDevices, DataParallel,
// GridShards, Problem, Config, ModelParam (Million), ModelSize (MB), Grid, GlobalBatchSize,
// LocalBatchSize, MicroBatchSize, GAS, InputShape, Runtime (min), Epochs, MixedPrecision,
// ComplexMixedPrecision, CompileMode, MeanCompileTime (s), TrainTime/Epoch (min), TotalEpochTime
// (s), TotalTrainTime (s), TotalComputeTime (s), TotalMonitorTime (s), TotalCheckpointTime (s),
// Timesteps, Timesteps/second, TrainTimesteps, TrainTimesteps/second, PeakFwdMem (MB),
// PersistentMem (MB), ActivationMem (MB), TFLOPs, Energy/GPU (Wh), TotalEnergy (Wh), then
// ValRelL2, Timesteps/Wh, Mode.
std::vector<report::Column> result_columns();

// CARAML's row order: by problem, then devices, then shards.
bool result_order(const report::RunRecord& a, const report::RunRecord& b);

// The range of every counter the workload writes (docs/reports.md, "What is checked").
const std::vector<report::CounterRule>& counter_rules();

// WorkloadTable::check: counter_rules() over the record, then, when the folder holds it, its
// per-step CSV read strictly and checked against the record (timed rows and their time).
void check_run(const std::filesystem::path& run_dir, const report::RunRecord& record);

// {kWorkloadName, result_columns(), result_order, check_run}.
report::WorkloadTable result_table();

}  // namespace scaffold::fno
