// The result table (report/table) and system.json (report/system_info): each writer's exact text
// from in-memory records (a run without energy, one that missed the target), the definitions
// behind each number (time to target, FOM, median, samples/s, energy, global batch), the readers
// of energy_stats.csv and run folders with their errors, and system.json's round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "report/run_record.hpp"
#include "report/system_info.hpp"
#include "report/table.hpp"
#include "test_util.hpp"

namespace scaffold::report {
namespace {
namespace fs = std::filesystem;

// Three rows: reached with energy; stopped by the time limit, no energy; reached, no energy.
std::vector<RunSummary> sample_rows() {
  RunSummary a;
  a.run = "scale7_1rank";
  a.problem_scale = 7;
  a.ranks = 1;
  a.shards = 1;
  a.global_batch = 4;
  a.epochs = 12;
  a.reached_target = true;
  a.time_to_target_s = 250.0;
  a.fom_per_s = 0.004;
  a.median_epoch_s = 20.5;
  a.training_samples = 2400;
  a.samples_per_s = 9.6;
  a.energy_to_target_wh = 12.5;
  a.samples_per_wh = 192.0;
  a.status = "reached_target";

  RunSummary b;
  b.run = "scale7_4ranks";
  b.problem_scale = 7;
  b.ranks = 4;
  b.shards = 2;
  b.dc_groupnorm = "local";
  b.global_batch = 8;
  b.epochs = 10;
  b.reached_target = false;
  b.time_to_target_s = 80.25;
  b.median_epoch_s = 8.0;
  b.training_samples = 1003;
  b.samples_per_s = 12.5;
  b.status = "time_limit";

  RunSummary c;
  c.run = "scale8_8ranks";
  c.problem_scale = 8;
  c.ranks = 8;
  c.shards = 8;
  c.dc_groupnorm = "global";
  c.global_batch = 1;
  c.epochs = 30;
  c.reached_target = true;
  c.time_to_target_s = 1234.5678;
  c.fom_per_s = 1.0 / 1234.5678;
  c.median_epoch_s = 41.15226;
  c.samples_per_s = 3.4567;
  c.status = "reached_target";
  return {a, b, c};
}

// Line-by-line comparison, so a failure names the first differing line (not one huge blob).
void expect_same_lines(const std::string& actual, const std::string& expected) {
  std::vector<std::string> a, e;
  for (std::size_t s = 0, n; s < actual.size(); s = n + 1) {
    n = actual.find('\n', s);
    if (n == std::string::npos) n = actual.size();
    a.push_back(actual.substr(s, n - s));
  }
  for (std::size_t s = 0, n; s < expected.size(); s = n + 1) {
    n = expected.find('\n', s);
    if (n == std::string::npos) n = expected.size();
    e.push_back(expected.substr(s, n - s));
  }
  for (std::size_t i = 0; i < std::min(a.size(), e.size()); ++i)
    ASSERT_EQ(a[i], e[i]) << "first difference at line " << i + 1;
  EXPECT_EQ(a.size(), e.size()) << actual;
  EXPECT_EQ(actual, expected);  // also the final newline
}

// ---------------------------------------------------------------------------------- writers

TEST(TableFormat, PrettyAlignsColumnsWithUnitsAndMarksMissedTargetsAndTimeLimits) {
  expect_same_lines(
      format_table(sample_rows(), "pretty"),
      R"(run            scale  ranks         shards  global batch  epochs  time to target [s]  FOM [1/s]  median epoch [s]  samples/s  energy to target [Wh]  samples/Wh  status
-------------  -----  -----  -------------  ------------  ------  ------------------  ---------  ----------------  ---------  ---------------------  ----------  --------------
scale7_1rank       7      1              1             4      12              250.00      0.004             20.50       9.60                 12.500       192.0  reached_target
scale7_4ranks      7      4   2 (local GN)             8      10              >80.25          -              8.00      12.50                      -           -  time_limit
scale8_8ranks      8      8  8 (global GN)             1      30             1234.57    0.00081             41.15       3.46                      -           -  reached_target

> target_dice not reached: time and energy are the whole run's (a lower bound), and there is no FOM.
> time_limit: stopped by the scheduler's signal before its time limit; the files are complete up to the last epoch, and restart.sh in the run folder resumes the run.
)");
}

TEST(TableFormat, CsvHasEveryNumberAtFullPrecisionAndEmptyCellsForMissingValues) {
  expect_same_lines(
      format_table(sample_rows(), "csv"),
      R"(run,problem_scale,ranks,shards,global_batch,epochs,reached_target,time_to_target_s,fom_per_s,median_epoch_s,samples_per_s,energy_to_target_wh,samples_per_wh,status,dc_groupnorm
scale7_1rank,7,1,1,4,12,true,250.0,0.004,20.5,9.6,12.5,192.0,reached_target,
scale7_4ranks,7,4,2,8,10,false,80.25,,8.0,12.5,,,time_limit,local
scale8_8ranks,8,8,8,1,30,true,1234.5678,0.0008100000664200054,41.15226,3.4567,,,reached_target,global
)");
}

TEST(TableFormat, MarkdownIsAPipeTableWithRightAlignedNumbers) {
  expect_same_lines(
      format_table(sample_rows(), "markdown"),
      R"(| run           | scale | ranks |        shards | global batch | epochs | time to target [s] | FOM [1/s] | median epoch [s] | samples/s | energy to target [Wh] | samples/Wh | status         |
|:--------------|------:|------:|--------------:|-------------:|-------:|-------------------:|----------:|-----------------:|----------:|----------------------:|-----------:|:---------------|
| scale7_1rank  |     7 |     1 |             1 |            4 |     12 |             250.00 |     0.004 |            20.50 |      9.60 |                12.500 |      192.0 | reached_target |
| scale7_4ranks |     7 |     4 |  2 (local GN) |            8 |     10 |             >80.25 |         - |             8.00 |     12.50 |                     - |          - | time_limit     |
| scale8_8ranks |     8 |     8 | 8 (global GN) |            1 |     30 |            1234.57 |   0.00081 |            41.15 |      3.46 |                     - |          - | reached_target |

> target_dice not reached: time and energy are the whole run's (a lower bound), and there is no FOM.
> time_limit: stopped by the scheduler's signal before its time limit; the files are complete up to the last epoch, and restart.sh in the run folder resumes the run.
)");
}

TEST(TableFormat, JsonIsAnArrayOfObjectsWithNullForMissingValues) {
  expect_same_lines(format_table(sample_rows(), "json"), R"([
  {
    "run": "scale7_1rank",
    "problem_scale": 7,
    "ranks": 1,
    "shards": 1,
    "global_batch": 4,
    "epochs": 12,
    "reached_target": true,
    "time_to_target_s": 250.0,
    "fom_per_s": 0.004,
    "median_epoch_s": 20.5,
    "samples_per_s": 9.6,
    "energy_to_target_wh": 12.5,
    "samples_per_wh": 192.0,
    "status": "reached_target",
    "dc_groupnorm": null
  },
  {
    "run": "scale7_4ranks",
    "problem_scale": 7,
    "ranks": 4,
    "shards": 2,
    "global_batch": 8,
    "epochs": 10,
    "reached_target": false,
    "time_to_target_s": 80.25,
    "fom_per_s": null,
    "median_epoch_s": 8.0,
    "samples_per_s": 12.5,
    "energy_to_target_wh": null,
    "samples_per_wh": null,
    "status": "time_limit",
    "dc_groupnorm": "local"
  },
  {
    "run": "scale8_8ranks",
    "problem_scale": 8,
    "ranks": 8,
    "shards": 8,
    "global_batch": 1,
    "epochs": 30,
    "reached_target": true,
    "time_to_target_s": 1234.5678,
    "fom_per_s": 0.0008100000664200054,
    "median_epoch_s": 41.15226,
    "samples_per_s": 3.4567,
    "energy_to_target_wh": null,
    "samples_per_wh": null,
    "status": "reached_target",
    "dc_groupnorm": "global"
  }
]
)");
}

TEST(TableFormat, NoNoteWhenEveryRunReachedTheTarget) {
  std::vector<RunSummary> rows = sample_rows();
  rows.erase(rows.begin() + 1);
  for (const char* format : {"pretty", "markdown"})
    EXPECT_EQ(format_table(rows, format).find("not reached"), std::string::npos) << format;
}

TEST(TableFormat, NamesAreQuotedInCsvAndPipesEscapedInMarkdown) {
  std::vector<RunSummary> rows = sample_rows();
  rows.resize(1);
  rows[0].run = R"(a,b "c"|d)";
  const std::string csv = format_table(rows, "csv");
  EXPECT_EQ(csv.substr(csv.find('\n') + 1, 13), R"("a,b ""c""|d")");
  const std::string md = format_table(rows, "markdown");
  EXPECT_NE(md.find(R"(| a,b "c"\|d |)"), std::string::npos) << md;
  EXPECT_NE(format_table(rows, "json").find(R"("run": "a,b \"c\"|d")"), std::string::npos);
}

TEST(TableFormat, NoRowsGivesHeadersOnly) {
  EXPECT_EQ(format_table({}, "csv"),
            "run,problem_scale,ranks,shards,global_batch,epochs,reached_target,time_to_target_s,"
            "fom_per_s,median_epoch_s,samples_per_s,energy_to_target_wh,samples_per_wh,status,dc_"
            "groupnorm\n");
  EXPECT_EQ(format_table({}, "json"), "[]\n");
  const std::string pretty = format_table({}, "pretty");
  EXPECT_EQ(std::count(pretty.begin(), pretty.end(), '\n'), 2) << pretty;
}

TEST(TableFormat, UnknownFormatListsTheWriters) {
  EXPECT_EQ(table_format_names(), (std::vector<std::string>{"pretty", "csv", "markdown", "json"}));
  try {
    format_table(sample_rows(), "xml");
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_STREQ(e.what(), "unknown table format 'xml'; available: pretty, csv, markdown, json");
  }
}

// ---------------------------------------------------------------------------------- summary

EpochRecord epoch(int64_t n, double val_dice, double duration_s, int64_t steps) {
  EpochRecord r;
  r.epoch = n;
  r.val_dice = val_dice;
  r.epoch_duration_s = duration_s;
  r.optimizer_steps = steps;
  r.total_optimizer_steps = n * steps;
  return r;
}

EnergyWindowRecord window(const std::string& name, int64_t n, double wh) {
  EnergyWindowRecord w;
  w.window = name;
  w.epoch = n;
  w.energy_wh = wh;
  w.energy_j = wh * 3600.0;
  return w;
}

RunData sample_run() {
  RunData run;
  run.name = "r";
  run.config.problem_scale = 6;
  run.config.local_batch_size = 3;
  run.config.dc_num_shards = {2, 1, 1};
  run.config.target_dice = 0.9;
  run.epochs = {epoch(1, 0.5, 4.0, 10), epoch(2, 0.8, 2.0, 10), epoch(3, 0.9, 3.0, 10)};
  return run;
}

TEST(Summary, ReachedTargetGivesTimeFomMedianAndThroughput) {
  RunData run = sample_run();
  SystemInfo system;
  system.world_size = 8;  // 2 spatial shards -> 4 replicas of local batch 3
  run.system = system;
  const RunSummary s = summarize_run(run);
  EXPECT_EQ(s.run, "r");
  EXPECT_EQ(s.problem_scale, 6);
  EXPECT_EQ(s.ranks, 8);
  EXPECT_EQ(s.shards, 2);  // from config.yaml: system.json names none
  EXPECT_EQ(s.global_batch, 12);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_TRUE(s.reached_target);  // val_dice == target_dice counts
  EXPECT_DOUBLE_EQ(s.time_to_target_s, 9.0);
  ASSERT_TRUE(s.fom_per_s);
  EXPECT_DOUBLE_EQ(*s.fom_per_s, 1.0 / 9.0);
  ASSERT_TRUE(s.median_epoch_s);
  EXPECT_DOUBLE_EQ(*s.median_epoch_s, 3.0);
  EXPECT_EQ(s.training_samples, 3 * 10 * 12);
  ASSERT_TRUE(s.samples_per_s);
  EXPECT_DOUBLE_EQ(*s.samples_per_s, 360.0 / 9.0);
  EXPECT_FALSE(s.energy_to_target_wh);  // no energy_stats.csv
  EXPECT_FALSE(s.samples_per_wh);
}

// A sharded run names its GroupNorm mode (config.yaml's dc_groupnorm; a config.yaml without the
// key is from before it, when global was the only mode); an unsharded run has none.
TEST(Summary, ShardedRunsNameTheirGroupNormMode) {
  RunData run = sample_run();  // dc_num_shards [2, 1, 1]
  run.config.dc_groupnorm = "local";
  EXPECT_EQ(summarize_run(run).dc_groupnorm, "local");
  run.config.dc_groupnorm = "";
  EXPECT_EQ(summarize_run(run).dc_groupnorm, "global");
  run.config.dc_num_shards = {1, 1, 1};
  run.config.dc_groupnorm = "local";
  EXPECT_EQ(summarize_run(run).dc_groupnorm, "");
}

TEST(Summary, MedianEpochOfAnEvenCountAveragesTheTwoMiddleEpochs) {
  RunData run = sample_run();
  run.epochs.push_back(epoch(4, 0.95, 6.0, 10));  // durations 4 2 3 6: sorted 2 3 4 6
  const RunSummary s = summarize_run(run);
  ASSERT_TRUE(s.median_epoch_s);
  EXPECT_DOUBLE_EQ(*s.median_epoch_s, 3.5);  // (3 + 4) / 2, numpy.median's definition
}

TEST(Summary, MissedTargetHasNoFomAndWithoutSystemJsonOneRank) {
  RunData run = sample_run();
  run.epochs.back().val_dice = 0.899;
  run.epochs.push_back(epoch(4, 0.95, 5.0, 10));
  run.epochs.push_back(epoch(5, 0.85, 1.0, 10));  // only the last row decides
  const RunSummary s = summarize_run(run);
  EXPECT_EQ(s.ranks, 1);
  EXPECT_EQ(s.global_batch, 3);  // max(1, 1 / 2) replicas
  EXPECT_FALSE(s.reached_target);
  EXPECT_DOUBLE_EQ(s.time_to_target_s, 15.0);
  EXPECT_FALSE(s.fom_per_s);
  EXPECT_DOUBLE_EQ(*s.median_epoch_s, 3.0);
  EXPECT_DOUBLE_EQ(*s.samples_per_s, 150.0 / 15.0);
}

TEST(Summary, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  RunData run = sample_run();
  run.epochs.push_back(epoch(4, 0.95, 10.0, 10));
  EXPECT_DOUBLE_EQ(*summarize_run(run).median_epoch_s, 3.5);
}

TEST(Summary, EnergyIsTrainPlusValidationWithoutWarmup) {
  RunData run = sample_run();
  run.energy = std::vector<EnergyWindowRecord>{
      window("warmup", 0, 100.0),  window("train", 1, 1.5),       window("validation", 1, 0.25),
      window("train", 2, 1.5),     window("validation", 2, 0.25), window("train", 3, 1.0),
      window("validation", 3, 0.5)};
  SystemInfo system;
  system.world_size = 4;
  system.dc_num_shards = {1, 1, 1};  // the shards the run used win over config.yaml's
  run.system = system;
  const RunSummary s = summarize_run(run);
  EXPECT_EQ(s.shards, 1);
  EXPECT_EQ(s.global_batch, 12);
  ASSERT_TRUE(s.energy_to_target_wh);
  EXPECT_DOUBLE_EQ(*s.energy_to_target_wh, 5.0);
  ASSERT_TRUE(s.samples_per_wh);
  EXPECT_DOUBLE_EQ(*s.samples_per_wh, 360.0 / 5.0);
}

TEST(Summary, EnergyFileWithoutTrainingWindowsGivesNoEnergy) {
  RunData run = sample_run();
  run.energy = std::vector<EnergyWindowRecord>{window("warmup", 0, 1.0)};
  EXPECT_FALSE(summarize_run(run).energy_to_target_wh);
}

TEST(Summary, NoEpochsYetIsAnEmptyRunNotAnError) {
  RunData run = sample_run();
  run.epochs.clear();
  const RunSummary s = summarize_run(run);
  EXPECT_EQ(s.epochs, 0);
  EXPECT_FALSE(s.reached_target);
  EXPECT_DOUBLE_EQ(s.time_to_target_s, 0.0);
  EXPECT_FALSE(s.fom_per_s);
  EXPECT_FALSE(s.median_epoch_s);
  EXPECT_FALSE(s.samples_per_s);
  EXPECT_NE(format_table({s}, "pretty").find(">0.00"), std::string::npos);
}

TEST(Summary, ScalingOrderIsScaleThenRanksThenName) {
  std::vector<RunSummary> rows(4);
  const std::vector<std::tuple<const char*, int, int>> given{
      {"d", 8, 1}, {"c", 7, 16}, {"b", 7, 2}, {"a", 7, 16}};
  for (std::size_t i = 0; i < given.size(); ++i)
    std::tie(rows[i].run, rows[i].problem_scale, rows[i].ranks) = given[i];
  sort_for_scaling(rows);
  std::string order;
  for (const RunSummary& r : rows) order += r.run;
  EXPECT_EQ(order, "bacd");
}

// ---------------------------------------------------------------------------------- readers

const char* kTrainHeader =
    "epoch,epoch_loss,overall_loss,val_loss_epoch,val_loss_avg,train_dice,val_dice,epoch_duration,"
    "optimizer_steps,total_optimizer_steps\n";

// A reader that records what it was given instead of parsing YAML.
struct FakeConfigReader {
  std::string* text;
  std::string* source;
  RunConfigFacts operator()(const std::string& t, const std::string& s) const {
    *text = t;
    *source = s;
    RunConfigFacts facts;
    facts.problem_scale = 9;
    return facts;
  }
};

TEST(RunFolder, ReadsConfigStatsEnergyAndSystem) {
  test::TempDir tmp;
  const fs::path run = tmp.path() / "benchmark_20250101-000000";
  core::create_directories(run);
  core::write_file_atomic(run / "config.yaml", "problem_scale: 9\n");
  core::write_file_atomic(run / "train_stats.csv",
                          std::string(kTrainHeader) + "1,1.0,0.5,1.0,0.5,0.3,0.4,2.5,4,4\n");
  std::string text, source;
  RunData data = read_run_folder(run, FakeConfigReader{&text, &source});
  EXPECT_EQ(data.name, "benchmark_20250101-000000");
  EXPECT_EQ(text, "problem_scale: 9\n");
  EXPECT_EQ(source, (run / "config.yaml").string());
  EXPECT_EQ(data.config.problem_scale, 9);
  ASSERT_EQ(data.epochs.size(), 1u);
  EXPECT_DOUBLE_EQ(data.epochs[0].epoch_duration_s, 2.5);
  EXPECT_FALSE(data.energy);
  EXPECT_FALSE(data.system);

  core::write_file_atomic(run / "energy_stats.csv", energy_stats_header() + "\n");
  SystemInfo info;
  info.world_size = 4;
  write_system_json(run, info);
  data = read_run_folder(run.string() + "/", FakeConfigReader{&text, &source});
  EXPECT_EQ(data.name, "benchmark_20250101-000000");  // a trailing slash changes nothing
  ASSERT_TRUE(data.energy);
  EXPECT_TRUE(data.energy->empty());
  ASSERT_TRUE(data.system);
  EXPECT_EQ(data.system->world_size, 4);
}

// The status column: summary.json's when the folder has one (a run stopped by its time limit),
// else what train_stats.csv says against the target.
TEST(RunFolder, StatusComesFromSummaryJsonElseFromTheTarget) {
  test::TempDir tmp;
  const fs::path run = tmp.path() / "benchmark_20250101-000000";
  core::create_directories(run);
  core::write_file_atomic(run / "config.yaml", "problem_scale: 9\n");
  core::write_file_atomic(run / "train_stats.csv",
                          std::string(kTrainHeader) + "1,1.0,0.5,1.0,0.5,0.3,0.4,2.5,4,4\n");
  std::string text, source;
  EXPECT_EQ(summarize_run(read_run_folder(run, FakeConfigReader{&text, &source})).status,
            "not_reached");
  RunRecord record = collect_run_context();
  record.workload = "benchmark";
  record.status = "time_limit";
  record.run = run.filename().string();
  record.device = "cpu";
  record.precision = "fp32";
  write_summary_json(run, record);
  const RunData data = read_run_folder(run, FakeConfigReader{&text, &source});
  ASSERT_TRUE(data.status);
  EXPECT_EQ(*data.status, "time_limit");
  EXPECT_EQ(summarize_run(data).status, "time_limit");
}

std::string folder_error(const fs::path& dir) {
  std::string text, source;
  try {
    read_run_folder(dir, FakeConfigReader{&text, &source});
  } catch (const core::FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << dir;
  return "";
}

TEST(RunFolder, NotARunFolderIsAnErrorNamingIt) {
  test::TempDir tmp;
  const fs::path run = tmp.path() / "empty";
  EXPECT_EQ(folder_error(run), run.string() + ": no such folder");
  core::create_directories(run);
  EXPECT_EQ(folder_error(run), run.string() +
                                   ": not a run folder: it has no config.yaml (a `scaffold "
                                   "benchmark` run folder holds config.yaml and train_stats.csv; "
                                   "every other workload's holds summary.json)");
  core::write_file_atomic(run / "config.yaml", "seed: 1\n");
  EXPECT_EQ(folder_error(run), run.string() +
                                   ": not a run folder: it has no train_stats.csv (a `scaffold "
                                   "benchmark` run folder holds config.yaml and train_stats.csv; "
                                   "every other workload's holds summary.json)");
  EXPECT_EQ(folder_error(run / "config.yaml"), (run / "config.yaml").string() + ": not a folder");
}

// ------------------------------------------------------------------------------ system.json

TEST(SystemJson, RoundTripsEveryFieldInDeclaredOrder) {
  SystemInfo info;
  info.host = "node001";
  info.cpu_model = "AMD EPYC 7763 64-Core Processor";
  info.cpu_isa = "family 25 model 1; avx2 fma; kernels fma; bf16 products in fp32";
  info.gpu_model = "NVIDIA H100 80GB HBM3";
  info.torch_version = "2.3.1";
  info.mpi_version = "Open MPI v4.1.4";
  info.compiler = "GCC 12.2.0";
  info.allocator = "tcmalloc";
  info.git_commit = "0123456789ab-dirty";
  info.scaffold_version = "0.1.0";
  info.device = "cuda:0";
  info.world_size = 16;
  info.nodes = 4;
  info.threads = 8;
  info.dc_num_shards = {2, 2, 1};
  info.blas = "OpenBLAS 0.3.21 DYNAMIC_ARCH USE_OPENMP Haswell MAX_THREADS=64; core Haswell";
  info.kernels = {"conv=onednn", "upconv=gemm"};
  info.kernels_run = {"conv=onednn x40, libtorch x2", "upconv=gemm x8"};
  info.kernel_fallbacks = {"conv: libtorch instead of onednn (an input oneDNN does not take)"};
  info.kernel_probes = {
      "conv x 8x64x56x56 nhwc Float w 64x64x3x3 s1x1 p1x1: winograd 7.9 ms, "
      "libtorch 14.4 ms -> winograd"};
  info.rank_devices = {"node001 cuda:0 visible=2 pci=0000:41:00.0", "node001 cuda:1"};
  info.created_at = "2025-03-12T10:15:00Z";
  test::TempDir tmp;
  write_system_json(tmp.path(), info);
  EXPECT_EQ(core::read_file(tmp.path() / "system.json"), R"json({
  "host": "node001",
  "cpu_model": "AMD EPYC 7763 64-Core Processor",
  "cpu_isa": "family 25 model 1; avx2 fma; kernels fma; bf16 products in fp32",
  "gpu_model": "NVIDIA H100 80GB HBM3",
  "torch_version": "2.3.1",
  "mpi_version": "Open MPI v4.1.4",
  "compiler": "GCC 12.2.0",
  "allocator": "tcmalloc",
  "blas": "OpenBLAS 0.3.21 DYNAMIC_ARCH USE_OPENMP Haswell MAX_THREADS=64; core Haswell",
  "git_commit": "0123456789ab-dirty",
  "scaffold_version": "0.1.0",
  "device": "cuda:0",
  "world_size": 16,
  "nodes": 4,
  "threads": 8,
  "dc_num_shards": [
    2,
    2,
    1
  ],
  "kernels": [
    "conv=onednn",
    "upconv=gemm"
  ],
  "kernels_run": [
    "conv=onednn x40, libtorch x2",
    "upconv=gemm x8"
  ],
  "kernel_fallbacks": [
    "conv: libtorch instead of onednn (an input oneDNN does not take)"
  ],
  "kernel_probes": [
    "conv x 8x64x56x56 nhwc Float w 64x64x3x3 s1x1 p1x1: winograd 7.9 ms, libtorch 14.4 ms -> winograd"
  ],
  "rank_devices": [
    "node001 cuda:0 visible=2 pci=0000:41:00.0",
    "node001 cuda:1"
  ],
  "created_at": "2025-03-12T10:15:00Z"
}
)json");
  const SystemInfo back = read_system_json(tmp.path() / "system.json");
  EXPECT_EQ(system_info_json(back), system_info_json(info));
}

TEST(SystemJson, MissingKeysKeepDefaultsAndBadValuesNameTheKey) {
  test::TempDir tmp;
  const fs::path file = tmp.path() / "system.json";
  core::write_file_atomic(file, R"({"host": "h", "world_size": 2, "extra": true})");
  const SystemInfo info = read_system_json(file);
  EXPECT_EQ(info.host, "h");
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.nodes, 1);
  EXPECT_TRUE(info.dc_num_shards.empty());
  EXPECT_TRUE(info.rank_devices.empty());  // system.json files from before the field

  const auto error = [&file](const std::string& text) -> std::string {
    core::write_file_atomic(file, text);
    try {
      read_system_json(file);
    } catch (const core::FileError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error(R"({"world_size": "4"})"),
            file.string() + ": key \"world_size\" is \"4\", expected an integer");
  EXPECT_EQ(error(R"({"world_size": 4.5})"),
            file.string() + ": key \"world_size\" is 4.5, expected an integer");
  EXPECT_EQ(error(R"({"dc_num_shards": [1, "2"]})"),
            file.string() + ": key \"dc_num_shards\" is [1,\"2\"], expected a list of integers");
  EXPECT_EQ(error(R"({"rank_devices": ["h cpu", 3]})"),
            file.string() + ": key \"rank_devices\" is [\"h cpu\",3], expected a list of strings");
  EXPECT_EQ(error("[1, 2]"), file.string() + ": expected a JSON object");
  EXPECT_EQ(error("{").rfind(file.string() + ": not valid JSON: ", 0), 0u);
}

TEST(SystemJson, HostInfoFillsWhatTheReportModuleCanLearn) {
  SystemInfo info;
  info.device = "cpu";  // the run's own fields stay as the caller set them
  info.world_size = 3;
  add_host_info(info);
  EXPECT_FALSE(info.host.empty());
  EXPECT_FALSE(info.cpu_model.empty());
#if defined(__x86_64__)
  // The kernels' clone follows /proc/cpuinfo's flags, read here on their own.
  std::string flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  const std::string clone = flags.find(" avx512f ") != std::string::npos ? "avx512f"
                            : flags.find(" fma ") != std::string::npos   ? "fma"
                                                                         : "default";
  // LibTorch hands bf16 products to oneDNN where the CPU has AVX-512 BW, VL and DQ.
  const bool bf16 = flags.find(" avx512bw ") != std::string::npos &&
                    flags.find(" avx512vl ") != std::string::npos &&
                    flags.find(" avx512dq ") != std::string::npos;
  EXPECT_TRUE(std::regex_match(info.cpu_isa,
                               std::regex(R"(family \d+ model \d+;[a-z0-9_ ]*; kernels )" + clone +
                                          "; bf16 products " + (bf16 ? "native" : "in fp32"))))
      << info.cpu_isa;
#endif
  EXPECT_FALSE(info.compiler.empty());
  EXPECT_TRUE(info.allocator == "tcmalloc" || info.allocator == "glibc") << info.allocator;
  EXPECT_FALSE(info.git_commit.empty());
  EXPECT_FALSE(info.scaffold_version.empty());
  EXPECT_TRUE(std::regex_match(info.created_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << info.created_at;
  // Left to the caller, as it set them: it knows the process grid, the device and the MPI library.
  EXPECT_EQ(info.world_size, 3);
  EXPECT_EQ(info.gpu_model, "");
  EXPECT_EQ(info.mpi_version, "");
  EXPECT_EQ(info.device, "cpu");
}

// A benchmark's summary.json as the table's row (summarize_record): every value from the record,
// the rates worked out here by hand; a record from before the table's counters gives nothing
// (the folder is then read from its CSV files); a parameter that is not an integer is an error
// naming the file and the parameter.
RunRecord benchmark_record_for_table() {
  RunRecord r;
  r.workload = "benchmark";
  r.status = kStatusReachedTarget;
  r.run = "recorded_name";
  r.ranks = 4;
  r.global_batch = 4;
  r.epochs = 3;
  r.time_s = 8.0;
  r.energy_wh = 2.0;
  r.params = {{"problem_scale", "6"}, {"dc_groupnorm", "local"}, {"shards", "2"}};
  r.counters = {{"training_samples", 96.0, "", ""}, {"median_epoch_s", 2.5, "s", ""}};
  return r;
}

TEST(SummarizeRecord, TheRowComesFromTheRecordAlone) {
  const std::optional<RunSummary> s =
      summarize_record(benchmark_record_for_table(), fs::path("runs") / "benchmark_x");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->run, "benchmark_x");  // the folder's name, as the CSV road names it
  EXPECT_EQ(s->problem_scale, 6);
  EXPECT_EQ(s->ranks, 4);
  EXPECT_EQ(s->shards, 2);
  EXPECT_EQ(s->dc_groupnorm, "local");
  EXPECT_EQ(s->global_batch, 4);
  EXPECT_EQ(s->epochs, 3);
  EXPECT_TRUE(s->reached_target);
  EXPECT_EQ(s->time_to_target_s, 8.0);
  EXPECT_EQ(s->training_samples, 96);
  ASSERT_TRUE(s->fom_per_s && s->median_epoch_s && s->samples_per_s && s->samples_per_wh);
  EXPECT_DOUBLE_EQ(*s->fom_per_s, 1.0 / 8.0);
  EXPECT_EQ(*s->median_epoch_s, 2.5);
  EXPECT_DOUBLE_EQ(*s->samples_per_s, 12.0);
  EXPECT_DOUBLE_EQ(*s->samples_per_wh, 48.0);
}

TEST(SummarizeRecord, AnOlderRecordIsLeftToTheCsvFiles) {
  RunRecord r = benchmark_record_for_table();
  r.counters.erase(r.counters.begin());  // no training_samples
  EXPECT_FALSE(summarize_record(r, "runs/old").has_value());
}

TEST(SummarizeRecord, ANonIntegerParameterNamesTheFileAndTheParameter) {
  RunRecord r = benchmark_record_for_table();
  r.params[2].second = "two";
  try {
    (void)summarize_record(r, "runs/bad");
    FAIL() << "no error";
  } catch (const core::FileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("runs/bad/summary.json"), std::string::npos) << what;
    EXPECT_NE(what.find("parameter shards is \"two\""), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace scaffold::report
