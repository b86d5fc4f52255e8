// Image classification's result table: CARAML's CSV columns for its PyTorch ResNet benchmark
// (image_classification_torch_benchmark.xml's result_csv table), titled exactly as CARAML titles
// them, then ours (training throughput, accuracy, energy), all read from a report::RunRecord. Also
// the names of the counters and parameters the workload must record for them. No LibTorch here:
// `scaffold report` links it.
#pragma once

#include <filesystem>
#include <vector>

#include "report/record_table.hpp"
#include "report/run_record.hpp"

namespace scaffold::imgcls {

inline constexpr const char* kWorkloadName = "image_classification";  // RunRecord::workload

// Counters the columns read (RunRecord::counters); the workload computes them over its timed
// epochs (warm-up excluded). Definitions: docs/reports.md.
inline constexpr const char* kCounterImagesPerS = "images_per_s";  // CARAML's Images/second
inline constexpr const char* kCounterTrainImagesPerS = "train_images_per_s";
inline constexpr const char* kCounterValTop1 = "val_top1";  // fraction in [0, 1]
inline constexpr const char* kCounterValTop5 = "val_top5";  // fraction in [0, 1]
inline constexpr const char* kCounterImagesPerWh = "images_per_wh";
inline constexpr const char* kCounterJPerImage = "j_per_image";

// Parameters the columns read (RunRecord::params), as text.
inline constexpr const char* kParamModel = "model";                 // "resnet50"
inline constexpr const char* kParamDataset = "dataset";             // "synthetic", "imagenet"
inline constexpr const char* kParamWorkers = "workers";             // data loader workers
inline constexpr const char* kParamChannelsLast = "channels_last";  // "true" / "false"
inline constexpr const char* kParamTf32 = "tf32";                   // the config's key: "1" / "0"
// What TF32 did (Tf32State::effect): "cudnn", "cudnn+cublas", "off", "none(cpu)"; the TF32 column.
inline constexpr const char* kParamTf32Effect = "tf32_effect";

// The columns, in order: JobID, System, Version, Queue, Runtime(s), Model, Dataset, Nodes,
// Devices, Tasks/Node, Threads/Task, Workers, GlobalBatchSize, BatchSize/Device, Epoch,
// Precision, Compiler, CompilerMode, ChannelLast, Images/second, then TrainImages/second,
// Top1(%), Top5(%), Energy(Wh), Images/Wh, J/image.
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

}  // namespace scaffold::imgcls
