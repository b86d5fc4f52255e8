// End-to-end tests of `scaffold report` on the two fixture run folders in tests/fixtures/runs/
// (scale 5: one rank that reached the target with energy_stats.csv; two ranks capped at 4 epochs,
// without energy): the whole stdout of each format, --plot's PNG, and the errors users see.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

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
      R"(run                        scale  ranks  shards  global batch  epochs  time to target [s]  FOM [1/s]  median epoch [s]  samples/s  energy to target [Wh]  samples/Wh
-------------------------  -----  -----  ------  ------------  ------  ------------------  ---------  ----------------  ---------  ---------------------  ----------
benchmark_20250312-101500      5      1       1             2       6               19.40    0.05155              3.20       8.66                  0.802       209.6
benchmark_20250312-113000      5      2       1             4       4               >7.35          -              1.81      15.23                      -           -

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
      R"(run,problem_scale,ranks,shards,global_batch,epochs,reached_target,time_to_target_s,fom_per_s,median_epoch_s,samples_per_s,energy_to_target_wh,samples_per_wh
benchmark_20250312-101500,5,1,1,2,6,true,19.399,0.05154904892004742,3.2015000000000002,8.660240218567967,0.8016209999999999,209.57534795121387
benchmark_20250312-113000,5,2,1,4,4,false,7.353000000000001,,1.8115,15.23187814497484,,
)");
}

TEST(Report, Markdown) {
  const Report r = report(both() + " --format markdown");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(
      r.out,
      R"(| run                       | scale | ranks | shards | global batch | epochs | time to target [s] | FOM [1/s] | median epoch [s] | samples/s | energy to target [Wh] | samples/Wh |
|:--------------------------|------:|------:|-------:|-------------:|-------:|-------------------:|----------:|-----------------:|----------:|----------------------:|-----------:|
| benchmark_20250312-101500 |     5 |     1 |      1 |            2 |      6 |              19.40 |   0.05155 |             3.20 |      8.66 |                 0.802 |      209.6 |
| benchmark_20250312-113000 |     5 |     2 |      1 |            4 |      4 |              >7.35 |         - |             1.81 |     15.23 |                     - |          - |

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
    "samples_per_wh": 209.57534795121387
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
    "samples_per_wh": null
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
  // One rank: one replica of local batch 2, so half the samples of the 2-rank original.
  EXPECT_EQ(r.out.substr(r.out.find('\n') + 1),
            "copy,5,1,1,2,4,false,7.353000000000001,,1.8115,7.61593907248742,,\n");
}

TEST(Report, BadFormatIsAUsageError) {
  const Report r = report(kReached.string() + " --format xml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pretty,csv,markdown,json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace scaffold
