// Image classification's result columns (workloads/image_classification/result_columns). The
// expected header and lines are written by
// hand from CARAML's column list (image_classification_torch_benchmark.xml, table result_csv)
// and the record's values, not generated.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "report/record_table.hpp"
#include "report/run_record.hpp"
#include "workloads/image_classification/result_columns.hpp"

namespace scaffold {
namespace {
using report::RunRecord;

// CARAML's CSV columns (image_classification_torch_benchmark.xml, without EnergyFile and the
// optional TrainOptim), then ours.
const char* const kHeader =
    "JobID,System,Version,Queue,Runtime(s),Model,Dataset,Nodes,Devices,Tasks/Node,Threads/Task,"
    "Workers,GlobalBatchSize,BatchSize/Device,Epoch,Precision,Compiler,CompilerMode,ChannelLast,"
    "Images/second,TF32,TrainImages/second,Top1(%),Top5(%),Energy(Wh),Images/Wh,J/image";

// A 2-node, 8-GPU run inside Slurm with every value present.
RunRecord jedi_run() {
  RunRecord r;
  r.workload = "image_classification";
  r.status = report::kStatusCompleted;
  r.run = "imgcls_20250312-101500";
  r.created_at = "2025-03-12T10:15:00Z";
  r.system = "JEDI";
  r.host = "jpbo-001-01";
  r.job_id = "123456";
  r.queue = "all";
  r.scaffold_version = "0.2.0";
  r.git_commit = "abc";
  r.ranks = 8;
  r.nodes = 2;
  r.devices = 8;
  r.tasks_per_node = 4;
  r.threads_per_task = 72;
  r.device = "cuda:0";
  r.global_batch = 256;
  r.local_batch = 32;
  r.precision = "bf16";
  r.epochs = 100;
  r.warmup_epochs = 5;
  r.time_s = 1300.0;
  r.runtime_s = 1400.256;
  r.energy_wh = 987.6543;
  r.params = {{"model", "resnet50"},
              {"dataset", "synthetic"},
              {"workers", "18"},
              {"channels_last", "true"},
              {"tf32_effect", "cudnn"}};
  r.counters = {{"images_per_s", 8100.1234, "images/s", ""},
                {"train_images_per_s", 9000.5, "images/s", ""},
                {"val_top1", 0.7512, "", ""},
                {"val_top5", 0.92, "", ""},
                {"images_per_wh", 10237.44, "images/Wh", ""},
                {"j_per_image", 0.3516, "J/image", ""}};
  return r;
}

// A laptop run outside Slurm: no job id (the run name stands in), no queue, no energy, no
// validation, and a workload that did not record its worker count.
RunRecord laptop_run() {
  RunRecord r;
  r.workload = "image_classification";
  r.status = report::kStatusTimeLimit;
  r.run = "imgcls_laptop";
  r.created_at = "2025-03-13T08:00:00Z";
  r.system = "laptop";
  r.host = "laptop";
  r.scaffold_version = "0.2.0";
  r.git_commit = "abc";
  r.threads_per_task = 8;
  r.device = "cpu";
  r.global_batch = 32;
  r.local_batch = 32;
  r.precision = "fp32";
  r.epochs = 2;
  r.time_s = 50.0;
  r.runtime_s = 61.0;
  r.params = {{"model", "resnet18"}, {"dataset", "synthetic"}, {"channels_last", "false"}};
  r.counters = {{"images_per_s", 12.345, "images/s", ""},
                {"train_images_per_s", 14.0, "images/s", ""}};
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(ImageClassificationColumns, CsvFollowsCaramlsColumnsThenOurs) {
  const report::WorkloadTable table = imgcls::result_table();
  EXPECT_EQ(table.workload, "image_classification");
  const std::vector<std::string> csv =
      lines(report::format_workload_table(table, {jedi_run(), laptop_run()}, "csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0], kHeader);
  // Fewer devices first: the laptop run, then the JEDI run.
  EXPECT_EQ(csv[1],
            "imgcls_laptop,laptop,0.2.0,,61.00,resnet18,synthetic,1,1,1,8,,32,32,2,fp32,native,-,"
            "false,12.35,,14.00,,,,,");
  EXPECT_EQ(csv[2],
            "123456,JEDI,0.2.0,all,1400.26,resnet50,synthetic,2,8,4,72,18,256,32,100,bf16,native,-,"
            "true,8100.12,cudnn,9000.50,75.12,92.00,987.654,10237.4,0.3516");
}

TEST(ImageClassificationColumns, PrettyShowsMissingValuesAsDashes) {
  const std::vector<std::string> pretty =
      lines(report::format_workload_table(imgcls::result_table(), {laptop_run()}, "pretty"));
  ASSERT_EQ(pretty.size(), 4u);
  EXPECT_EQ(pretty[0], "== image_classification ==");
  EXPECT_EQ(pretty[1].rfind("JobID          System  Version  Queue  Runtime(s)  Model", 0), 0u)
      << pretty[1];
  EXPECT_EQ(pretty[3].rfind("imgcls_laptop  laptop  0.2.0    -           61.00  resnet18", 0), 0u)
      << pretty[3];
  // Top1, Top5, Energy, Images/Wh and J/image are all missing.
  EXPECT_EQ(pretty[3].substr(pretty[3].size() - 4), "   -") << pretty[3];
}

TEST(ImageClassificationColumns, SortedByDevicesThenNodesThenGlobalBatch) {
  std::vector<RunRecord> runs;
  const auto add = [&runs](const std::string& name, int devices, int nodes, int64_t gbs) {
    RunRecord r = laptop_run();
    r.run = name;
    r.devices = devices;
    r.nodes = nodes;
    r.global_batch = gbs;
    runs.push_back(r);
  };
  add("d8_n2_b64", 8, 2, 64);
  add("d4_n1_b512", 4, 1, 512);
  add("d8_n1_b128", 8, 1, 128);
  add("d4_n1_b32", 4, 1, 32);
  add("d8_n2_b32", 8, 2, 32);
  report::sort_records(imgcls::result_table(), runs);
  std::vector<std::string> order;
  for (const RunRecord& r : runs) order.push_back(r.run);
  EXPECT_EQ(order, (std::vector<std::string>{"d4_n1_b32", "d4_n1_b512", "d8_n1_b128", "d8_n2_b32",
                                             "d8_n2_b64"}));
}

TEST(ImageClassificationColumns, NonFiniteCountersAreMissingAndJobIdFallsBackToTheRun) {
  RunRecord r = jedi_run();
  r.counters[0].value = std::numeric_limits<double>::quiet_NaN();
  r.job_id.clear();
  const std::vector<std::string> csv =
      lines(report::format_workload_table(imgcls::result_table(), {r}, "csv"));
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1].rfind("imgcls_20250312-101500,JEDI,", 0), 0u) << csv[1];
  EXPECT_NE(csv[1].find(",true,,cudnn,9000.50,"), std::string::npos) << csv[1];
}

}  // namespace
}  // namespace scaffold
