// End-to-end tests of `scaffold report` on the two fixture run folders in tests/fixtures/runs/
// (scale 5: one rank that reached the target with energy_stats.csv; two ranks capped at 4 epochs,
// without energy): the whole stdout of each format, --plot's PNG, and the errors users see. Then
// on two hand-written image-classification summary.json folders: CARAML's CSV line by line, the
// other formats, mixing them with benchmark folders, and their errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

const fs::path kRuns = fs::path(SCAFFOLD_SOURCE_DIR) / "tests" / "fixtures" / "runs";
const fs::path kReached = kRuns / "benchmark_20250312-101500";  // 1 rank, energy, reached
const fs::path kCapped = kRuns / "benchmark_20250312-113000";   // 2 ranks, no energy, missed

struct Report {
  int exit_code = -1;
  std::string out;  // stdout only
  std::string err;  // stderr only
};

// Runs `scaffold report <args>` with stdout and stderr kept apart.
Report report(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  const fs::path err = tmp.path() / "stderr";
  // The subshell's own 2>&1 (added by run_command) sees nothing: stderr went to the file.
  const auto r =
      run_command("(" + env + " " + kBinary + " report " + args + " 2>" + err.string() + ")");
  return {r.exit_code, r.output, fs::exists(err) ? core::read_file(err) : ""};
}

// Both folders, in the opposite of the table's (scale, ranks) order.
std::string both() {
  return kCapped.string() + " " + kReached.string();
}

TEST(Report, PrettyIsTheDefault) {
  const Report r = report(both());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(
      r.out,
      R"(run                        scale  ranks  shards  global batch  epochs  time to target [s]  FOM [1/s]  median epoch [s]  samples/s  energy to target [Wh]  samples/Wh  status
-------------------------  -----  -----  ------  ------------  ------  ------------------  ---------  ----------------  ---------  ---------------------  ----------  --------------
benchmark_20250312-101500      5      1       1             2       6               19.40    0.05155              3.20       8.66                  0.802       209.6  reached_target
benchmark_20250312-113000      5      2       1             4       4               >7.35          -              1.81      15.23                      -           -  not_reached

> target_dice not reached: time and energy are the whole run's (a lower bound), and there is no FOM.
)");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(report(both() + " --format pretty").out, r.out);
}

TEST(Report, Csv) {
  const Report r = report(both() + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(
      r.out,
      R"(run,problem_scale,ranks,shards,global_batch,epochs,reached_target,time_to_target_s,fom_per_s,median_epoch_s,samples_per_s,energy_to_target_wh,samples_per_wh,status,dc_groupnorm
benchmark_20250312-101500,5,1,1,2,6,true,19.399,0.05154904892004742,3.2015000000000002,8.660240218567967,0.8016209999999999,209.57534795121387,reached_target,
benchmark_20250312-113000,5,2,1,4,4,false,7.353000000000001,,1.8115,15.23187814497484,,,not_reached,
)");
}

TEST(Report, Markdown) {
  const Report r = report(both() + " --format markdown");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(
      r.out,
      R"(| run                       | scale | ranks | shards | global batch | epochs | time to target [s] | FOM [1/s] | median epoch [s] | samples/s | energy to target [Wh] | samples/Wh | status         |
|:--------------------------|------:|------:|-------:|-------------:|-------:|-------------------:|----------:|-----------------:|----------:|----------------------:|-----------:|:---------------|
| benchmark_20250312-101500 |     5 |     1 |      1 |            2 |      6 |              19.40 |   0.05155 |             3.20 |      8.66 |                 0.802 |      209.6 | reached_target |
| benchmark_20250312-113000 |     5 |     2 |      1 |            4 |      4 |              >7.35 |         - |             1.81 |     15.23 |                     - |          - | not_reached    |

> target_dice not reached: time and energy are the whole run's (a lower bound), and there is no FOM.
)");
}

TEST(Report, Json) {
  const Report r = report(both() + " --format=json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, R"([
  {
    "run": "benchmark_20250312-101500",
    "problem_scale": 5,
    "ranks": 1,
    "shards": 1,
    "global_batch": 2,
    "epochs": 6,
    "reached_target": true,
    "time_to_target_s": 19.399,
    "fom_per_s": 0.05154904892004742,
    "median_epoch_s": 3.2015000000000002,
    "samples_per_s": 8.660240218567967,
    "energy_to_target_wh": 0.8016209999999999,
    "samples_per_wh": 209.57534795121387,
    "status": "reached_target",
    "dc_groupnorm": null
  },
  {
    "run": "benchmark_20250312-113000",
    "problem_scale": 5,
    "ranks": 2,
    "shards": 1,
    "global_batch": 4,
    "epochs": 4,
    "reached_target": false,
    "time_to_target_s": 7.353000000000001,
    "fom_per_s": null,
    "median_epoch_s": 1.8115,
    "samples_per_s": 15.23187814497484,
    "energy_to_target_wh": null,
    "samples_per_wh": null,
    "status": "not_reached",
    "dc_groupnorm": null
  }
]
)");
}

TEST(Report, PlotWritesAPngAndStillPrintsTheTable) {
  if (run_command("command -v gnuplot").exit_code != 0) GTEST_SKIP() << "no gnuplot on PATH";
  TempDir tmp;
  const fs::path png = tmp.path() / "plots" / "scaling.png";
  const Report r = report(both() + " --format csv --plot " + png.string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, report(both() + " --format csv").out);
  ASSERT_TRUE(fs::is_regular_file(png)) << r.err;
  const std::string bytes = core::read_file(png);
  EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_GT(bytes.size(), 10000u);  // a drawn 1800x1200 figure, not an empty canvas
  // Nothing but the image is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(png.parent_path()), fs::directory_iterator()), 1);
}

TEST(Report, PlotWithoutGnuplotIsAClearError) {
  TempDir tmp;
  const fs::path png = tmp.path() / "scaling.png";
  const Report r = report(both() + " --plot " + png.string(), "PATH=" + tmp.path().string());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out, "");  // no table that looks like success
  EXPECT_NE(r.err.find("--plot " + png.string() + ": no gnuplot on PATH"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(png));
}

TEST(Report, AFolderThatIsNotARunFolderIsAnErrorNamingIt) {
  TempDir tmp;
  const Report r = report(kReached.string() + " " + tmp.path().string());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(tmp.path().string() + ": not a run folder: it has no config.yaml"),
            std::string::npos)
      << r.err;

  const Report missing = report((tmp.path() / "nope").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find((tmp.path() / "nope").string() + ": no such folder"),
            std::string::npos)
      << missing.err;
}

TEST(Report, WithoutSystemJsonTheRunCountsAsOneRank) {
  TempDir tmp;
  const fs::path run = tmp.path() / "copy";
  fs::copy(kCapped, run);
  fs::remove(run / "system.json");
  const Report r = report(run.string() + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // One rank: one replica of local batch 2, so half the samples of the 2-rank original; the last
  // column (dc_groupnorm) is empty for an unsharded run.
  EXPECT_EQ(r.out.substr(r.out.find('\n') + 1),
            "copy,5,1,1,2,4,false,7.353000000000001,,1.8115,7.61593907248742,,,not_reached,\n");
}

TEST(Report, BadFormatIsAUsageError) {
  const Report r = report(kReached.string() + " --format xml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretty,csv,markdown,json"), std::string::npos) << r.err;
}

// ------------------------------------------------------------ image classification records

// Two hand-written summary.json files: a 2-node, 8-GPU run in Slurm with every value, and a
// laptop run (no job, no queue, no energy, no accuracy, no worker count).
constexpr const char* kJediSummary = R"({
  "schema": "scaffold-run/1",
  "workload": "image_classification",
  "status": "completed",
  "run": "imgcls_20250312-101500",
  "created_at": "2025-03-12T10:15:00Z",
  "system": "JEDI",
  "host": "jpbo-001-01",
  "job_id": "123456",
  "queue": "all",
  "scaffold_version": "0.2.0",
  "git_commit": "5a4d3becec78",
  "ranks": 8,
  "nodes": 2,
  "devices": 8,
  "tasks_per_node": 4,
  "threads_per_task": 72,
  "device": "cuda:0",
  "global_batch": 256,
  "local_batch": 32,
  "precision": "bf16",
  "epochs": 100,
  "warmup_epochs": 5,
  "time_s": 1300.5,
  "runtime_s": 1400.256,
  "energy_wh": 987.6543,
  "params": {"model": "resnet50", "dataset": "synthetic", "workers": "18", "channels_last": "true"},
  "counters": [
    {"name": "images_per_s", "value": 8100.1234, "unit": "images/s", "help": "10 000 images / epoch time"},
    {"name": "train_images_per_s", "value": 9000.5, "unit": "images/s", "help": "training only"},
    {"name": "val_top1", "value": 0.7512, "unit": "", "help": "last epoch"},
    {"name": "val_top5", "value": 0.92, "unit": "", "help": "last epoch"},
    {"name": "images_per_wh", "value": 10237.44, "unit": "images/Wh", "help": ""},
    {"name": "j_per_image", "value": 0.3516, "unit": "J/image", "help": ""}
  ]
}
)";

constexpr const char* kLaptopSummary = R"({
  "schema": "scaffold-run/1",
  "workload": "image_classification",
  "status": "time_limit",
  "run": "imgcls_laptop",
  "created_at": "2025-03-13T08:00:00Z",
  "system": "laptop",
  "host": "laptop",
  "job_id": "",
  "queue": "",
  "scaffold_version": "0.2.0",
  "git_commit": "5a4d3becec78",
  "ranks": 1,
  "nodes": 1,
  "devices": 1,
  "tasks_per_node": 1,
  "threads_per_task": 8,
  "device": "cpu",
  "global_batch": 32,
  "local_batch": 32,
  "precision": "fp32",
  "epochs": 2,
  "warmup_epochs": 1,
  "time_s": 50,
  "runtime_s": 61,
  "energy_wh": null,
  "params": {"model": "resnet18", "dataset": "synthetic", "channels_last": "false"},
  "counters": [
    {"name": "images_per_s", "value": 12.345, "unit": "images/s", "help": ""},
    {"name": "train_images_per_s", "value": 14, "unit": "images/s", "help": ""}
  ]
}
)";

// A run folder holding only `summary` as summary.json.
fs::path summary_folder(const fs::path& parent, const std::string& name,
                        const std::string& summary) {
  const fs::path dir = parent / name;
  fs::create_directories(dir);
  std::ofstream(dir / "summary.json") << summary;
  return dir;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The two image-classification folders, the larger run first (the table sorts by devices).
struct ImgclsRuns {
  TempDir tmp;
  fs::path jedi = summary_folder(tmp.path(), "jedi", kJediSummary);
  fs::path laptop = summary_folder(tmp.path(), "laptop", kLaptopSummary);
  std::string both() const { return jedi.string() + " " + laptop.string(); }
};

TEST(ReportRecords, ImageClassificationCsvHasCaramlsColumnsLineByLine) {
  const ImgclsRuns runs;
  const Report r = report(runs.both() + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> csv = lines(r.out);
  ASSERT_EQ(csv.size(), 3u) << r.out;
  EXPECT_EQ(csv[0],
            "JobID,System,Version,Queue,Runtime(s),Model,Dataset,Nodes,Devices,Tasks/Node,"
            "Threads/Task,Workers,GlobalBatchSize,BatchSize/Device,Epoch,Precision,Compiler,"
            "CompilerMode,ChannelLast,Images/second,TF32,TrainImages/second,Top1(%),Top5(%),"
            "Energy(Wh),Images/Wh,J/image");
  EXPECT_EQ(csv[1],
            "imgcls_laptop,laptop,0.2.0,,61.00,resnet18,synthetic,1,1,1,8,,32,32,2,fp32,native,-,"
            "false,12.35,,14.00,,,,,");
  EXPECT_EQ(csv[2],
            "123456,JEDI,0.2.0,all,1400.26,resnet50,synthetic,2,8,4,72,18,256,32,100,bf16,native,-,"
            "true,8100.12,,9000.50,75.12,92.00,987.654,10237.4,0.3516");
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(ReportRecords, PrettyAndMarkdownAreHeadedByTheWorkload) {
  const ImgclsRuns runs;
  const Report pretty = report(runs.both());
  ASSERT_EQ(pretty.exit_code, 0) << pretty.out << pretty.err;
  const std::vector<std::string> p = lines(pretty.out);
  ASSERT_EQ(p.size(), 5u) << pretty.out;
  EXPECT_EQ(p[0], "== image_classification ==");
  EXPECT_EQ(p[1].rfind("JobID          System  Version  Queue  Runtime(s)  Model     Dataset", 0),
            0u)
      << p[1];
  EXPECT_EQ(p[2].rfind("-------------  ------  -------  -----  ----------  --------  ---------", 0),
            0u)
      << p[2];
  EXPECT_EQ(p[3].rfind("imgcls_laptop  laptop  0.2.0    -           61.00  resnet18  synthetic", 0),
            0u)
      << p[3];
  EXPECT_EQ(p[4].rfind("123456         JEDI    0.2.0    all       1400.26  resnet50  synthetic", 0),
            0u)
      << p[4];

  const Report md = report(runs.both() + " --format markdown");
  ASSERT_EQ(md.exit_code, 0) << md.out << md.err;
  const std::vector<std::string> m = lines(md.out);
  ASSERT_EQ(m.size(), 6u) << md.out;
  EXPECT_EQ(m[0], "### image_classification");
  EXPECT_EQ(m[1], "");
  EXPECT_EQ(m[2].rfind("| JobID         | System | Version | Queue | Runtime(s) |", 0), 0u) << m[2];
  EXPECT_EQ(m[3].rfind("|:--------------|:-------|:--------|:------|-----------:|", 0), 0u) << m[3];
}

TEST(ReportRecords, JsonPrintsTheRecordsInTableOrder) {
  const ImgclsRuns runs;
  const Report r = report(runs.both() + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> j = lines(r.out);
  ASSERT_GT(j.size(), 60u) << r.out;
  EXPECT_EQ(j[0], "[");
  EXPECT_EQ(j[1], "  {");
  EXPECT_EQ(j[2], R"(    "schema": "scaffold-run/1",)");
  EXPECT_EQ(j[3], R"(    "workload": "image_classification",)");
  EXPECT_EQ(j[4], R"(    "status": "time_limit",)");
  EXPECT_EQ(j[5], R"(    "run": "imgcls_laptop",)");
  EXPECT_NE(r.out.find(R"("energy_wh": 987.6543,)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("value": 8100.1234,)"), std::string::npos) << r.out;  // full precision
  EXPECT_EQ(j.back(), "]");
}

TEST(ReportRecords, BenchmarkFoldersKeepTheirTableAheadOfTheOtherWorkloads) {
  const ImgclsRuns runs;
  const Report r = report(runs.laptop.string() + " " + both() + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string benchmark = report(both() + " --format csv").out;
  ASSERT_EQ(r.out.substr(0, benchmark.size()), benchmark);
  const std::vector<std::string> rest = lines(r.out.substr(benchmark.size()));
  ASSERT_EQ(rest.size(), 3u) << r.out;
  EXPECT_EQ(rest[0], "");  // a blank line between the tables
  EXPECT_EQ(rest[1].rfind("JobID,System,", 0), 0u);
  EXPECT_EQ(rest[2].rfind("imgcls_laptop,laptop,", 0), 0u);

  const Report pretty = report(runs.laptop.string() + " " + both());
  ASSERT_EQ(pretty.exit_code, 0) << pretty.out << pretty.err;
  EXPECT_EQ(pretty.out.rfind("== benchmark ==\nrun  ", 0), 0u) << pretty.out;
  EXPECT_NE(pretty.out.find("\n\n== image_classification ==\nJobID "), std::string::npos)
      << pretty.out;

  const Report json = report(runs.laptop.string() + " " + both() + " --format json");
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_EQ(json.out, "");
  EXPECT_NE(json.err.find("--format json: `scaffold benchmark` folders and other workloads'"),
            std::string::npos)
      << json.err;
}

TEST(ReportRecords, AnUnknownWorkloadIsAnErrorNamingTheFolderAndTheWorkload) {
  const ImgclsRuns runs;
  std::string gpt = kLaptopSummary;
  gpt.replace(gpt.find("image_classification"), 20, "gpt_pretrain");
  const fs::path dir = summary_folder(runs.tmp.path(), "gpt", gpt);
  const Report r = report(runs.both() + " " + dir.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(dir.string() +
                       ": its summary.json is of workload \"gpt_pretrain\", which scaffold "
                       "report has no table for (known workloads: benchmark, image_classification, "
                       "llm_training, fno)"),
            std::string::npos)
      << r.err;
}

TEST(ReportRecords, AMalformedSummaryNamesTheFileAndTheKey) {
  const ImgclsRuns runs;
  std::string bad = kLaptopSummary;
  bad.replace(bad.find("\"devices\": 1"), 12, "\"devices\": \"1\"");
  const fs::path dir = summary_folder(runs.tmp.path(), "bad", bad);
  const Report r = report(dir.string() + " --format csv");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find((dir / "summary.json").string() +
                       ": key \"devices\" is \"1\", expected an integer >= 1"),
            std::string::npos)
      << r.err;
}

// Per-step CSVs that agree with kLaptopSummary (1 warm-up and 2 timed epochs or log intervals,
// 50 s timed), one per workload, with the column to damage: a time and a count.
struct StepCsv {
  const char* workload;
  const char* counter;  // a rate the workload's table prints
  const char* file;
  const char* text;
  std::size_t time_column;
  const char* time_name;
  std::size_t count_column;
  const char* count_name;
  std::size_t columns;
};
const StepCsv kStepCsvs[] = {
    {"image_classification", "images_per_s", "epoch_stats.csv",
     "epoch,warmup,train_loss,train_top1,val_loss,val_top1,val_top5,lr,duration_s,train_s,"
     "validation_s,train_images,val_images,median_step_s\n"
     "1,1,2.0,0.3,1.9,0.35,0.9,0.01,30.0,28.0,2.0,288,64,0.1\n"
     "2,0,1.5,0.5,1.4,0.55,0.95,0.01,25.0,23.0,2.0,288,64,0.08\n"
     "3,0,1.2,0.6,1.1,0.65,0.97,0.01,25.0,23.0,2.0,288,64,0.08\n",
     8, "duration_s", 11, "train_images", 14},
    {"llm_training", "tokens_per_s", "iteration_stats.csv",
     "iteration,iterations,warmup,train_s,time_per_iteration_s,lm_loss,val_loss,lr,grad_norm,"
     "loss_scale,skipped\n"
     "5,5,1,10.0,2.0,10.5,nan,1e-05,1.5,1.0,0\n"
     "10,5,0,25.0,5.0,9.5,9.4,1e-05,1.2,1.0,0\n"
     "15,5,0,25.0,5.0,9.0,nan,1e-05,1.1,1.0,0\n",
     3, "train_s", 10, "skipped", 11},
    {"fno", "timesteps_per_s", "epoch_stats.csv",
     "epoch,warmup,train_rel_l2,val_rel_l2,val_mse,lr,duration_s,train_s,validation_s,monitor_s,"
     "checkpoint_s,train_samples,val_samples,median_step_s\n"
     "1,1,0.9,0.9,0.1,0.001,30.0,25.0,4.0,0.5,0.5,40,10,0.5\n"
     "2,0,0.5,0.6,0.05,0.001,24.0,20.0,3.0,0.5,0.5,40,10,0.5\n"
     "3,0,0.4,0.5,0.04,0.001,24.0,20.0,3.0,0.5,0.5,40,10,0.5\n",
     6, "duration_s", 11, "train_samples", 14},
};

// kLaptopSummary as a record of `workload` whose first counter is `counter` = `value`.
std::string laptop_summary_of(const std::string& workload, const std::string& counter,
                              const std::string& value) {
  std::string text = kLaptopSummary;
  text.replace(text.find("image_classification"), 20, workload);
  const std::string first = R"("name": "images_per_s", "value": 12.345)";
  text.replace(text.find(first), first.size(),
               R"("name": ")" + counter + R"(", "value": )" + value);
  return text;
}

// `csv` with the cell at (line, column) (1-based line, 0-based column) set to `value`, or
// removed when `value` is null.
std::string with_cell(const std::string& csv, std::size_t line, std::size_t column,
                      const char* value) {
  std::vector<std::string> rows = lines(csv);
  std::vector<std::string> cells;
  std::stringstream in(rows[line - 1]);
  for (std::string c; std::getline(in, c, ',');) cells.push_back(c);
  if (value == nullptr)
    cells.erase(cells.begin() + static_cast<std::ptrdiff_t>(column));
  else
    cells[column] = value;
  std::string row;
  for (const std::string& c : cells) row += (row.empty() ? "" : ",") + c;
  rows[line - 1] = row;
  std::string out;
  for (const std::string& r : rows) out += r + "\n";
  return out;
}

TEST(ReportRecords, StepCsvsThatAgreeWithTheSummaryAreAccepted) {
  for (const StepCsv& c : kStepCsvs) {
    TempDir tmp;
    const fs::path dir =
        summary_folder(tmp.path(), "run", laptop_summary_of(c.workload, c.counter, "12.345"));
    std::ofstream(dir / c.file) << c.text;
    const Report r = report(dir.string() + " --format csv");
    EXPECT_EQ(r.exit_code, 0) << c.workload << "\n" << r.out << r.err;
    EXPECT_EQ(r.err, "") << c.workload;
  }
}

// Every kind of damage, in every workload's per-step CSV: one error naming the file, the line
// and the column with what was expected; nothing on stdout, exit 1, although the other folder
// given with it is fine (one bad folder fails the whole report).
TEST(ReportRecords, ADamagedStepCsvIsOneErrorNamingTheFileLineAndColumn) {
  for (const StepCsv& c : kStepCsvs) {
    const std::string header = lines(c.text)[0];
    struct Damage {
      std::string what, text, expected;
    };
    const std::vector<Damage> damages = {
        {"wrong header", "x" + std::string(c.text),
         "line 1: the header is 'x" + header.substr(0, 36) + "...', expected '" + header + "'"},
        {"short row", with_cell(c.text, 3, 5, nullptr),
         fmt::format("line 3: expected {} columns, found {}", c.columns, c.columns - 1)},
        {"trailing text", with_cell(c.text, 3, c.time_column, "25.0x"),
         fmt::format("line 3: column {} is '25.0x', expected a finite number >= 0", c.time_name)},
        {"empty cell", with_cell(c.text, 3, c.time_column, ""),
         fmt::format("line 3: column {} is '', expected a finite number >= 0", c.time_name)},
        {"nan time", with_cell(c.text, 4, c.time_column, "nan"),
         fmt::format("line 4: column {} is 'nan', expected a finite number >= 0", c.time_name)},
        {"infinite time", with_cell(c.text, 2, c.time_column, "inf"),
         fmt::format("line 2: column {} is 'inf', expected a finite number >= 0", c.time_name)},
        {"negative time", with_cell(c.text, 3, c.time_column, "-25.0"),
         fmt::format("line 3: column {} is '-25.0', expected a finite number >= 0", c.time_name)},
        {"negative count", with_cell(c.text, 3, c.count_column, "-1"),
         fmt::format("line 3: column {} is '-1', expected an integer >= 0", c.count_name)},
        {"fractional count", with_cell(c.text, 3, c.count_column, "2.5"),
         fmt::format("line 3: column {} is '2.5', expected an integer >= 0", c.count_name)},
        {"a timed row missing", c.text + std::string(), ""},
    };
    for (const Damage& d : damages) {
      TempDir tmp;
      const fs::path dir =
          summary_folder(tmp.path(), "run", laptop_summary_of(c.workload, c.counter, "12.345"));
      std::string text = d.text;
      std::string expected = (dir / c.file).string() + ": " + d.expected;
      if (d.what == "a timed row missing") {
        text = text.substr(0, text.rfind('\n', text.size() - 2) + 1);  // drop the last row
        expected = (dir / c.file).string() + ": holds 1 timed row";
      }
      std::ofstream(dir / c.file) << text;
      const fs::path good =
          summary_folder(tmp.path(), "good", laptop_summary_of(c.workload, c.counter, "12.345"));
      const Report r = report(good.string() + " " + dir.string() + " --format csv");
      EXPECT_EQ(r.exit_code, 1) << c.workload << ", " << d.what << ":\n" << r.out << r.err;
      EXPECT_EQ(r.out, "") << c.workload << ", " << d.what;
      EXPECT_NE(r.err.find(expected), std::string::npos)
          << c.workload << ", " << d.what << ": expected\n  " << expected << "\nin\n  " << r.err;
    }
  }
}

// A counter that cannot be negative (a rate, time, count or energy), or a fraction above 1, in an
// edited summary.json: an error naming the file, the key and the counter.
TEST(ReportRecords, ANegativeCounterIsAnErrorNamingTheFileAndTheKey) {
  for (const StepCsv& c : kStepCsvs) {
    TempDir tmp;
    const fs::path dir =
        summary_folder(tmp.path(), "run", laptop_summary_of(c.workload, c.counter, "-12.345"));
    const Report r = report(dir.string() + " --format csv");
    EXPECT_EQ(r.exit_code, 1) << c.workload << "\n" << r.out << r.err;
    EXPECT_EQ(r.out, "") << c.workload;
    const std::string expected =
        (dir / "summary.json").string() +
        ": key \"counters[0].value\" is -12.345, expected a number >= 0 (" + c.counter + ")";
    EXPECT_NE(r.err.find(expected), std::string::npos)
        << c.workload << ": expected\n  " << expected << "\nin\n  " << r.err;
  }
  TempDir tmp;
  const fs::path top1 = summary_folder(
      tmp.path(), "top1", laptop_summary_of("image_classification", "val_top1", "1.5"));
  const Report r = report(top1.string());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find((top1 / "summary.json").string() +
                       ": key \"counters[0].value\" is 1.5, expected a fraction in [0, 1] "
                       "(val_top1)"),
            std::string::npos)
      << r.err;
}

// A required key missing, or of the wrong type, names the file and the key.
TEST(ReportRecords, AMissingSummaryKeyNamesTheFileAndTheKey) {
  TempDir tmp;
  std::string text = laptop_summary_of("llm_training", "tokens_per_s", "12.345");
  const std::string time = "  \"time_s\": 50,\n";
  text.erase(text.find(time), time.size());
  const fs::path dir = summary_folder(tmp.path(), "run", text);
  const Report r = report(dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find((dir / "summary.json").string() +
                       ": key \"time_s\" is missing (expected a number >= 0)"),
            std::string::npos)
      << r.err;
}

TEST(ReportRecords, PlotNeedsBenchmarkRuns) {
  const ImgclsRuns runs;
  const fs::path png = runs.tmp.path() / "scaling.png";
  const Report r = report(runs.both() + " --plot " + png.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--plot " + png.string() + ": the plot is of `scaffold benchmark` runs"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(png));
}

}  // namespace
}  // namespace scaffold
