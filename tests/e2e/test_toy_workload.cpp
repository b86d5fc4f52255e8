// A fifth workload added through the registry seam alone (toy_workload/toy_workload.cpp: its
// options, schema, run, CSV and table, and a main() that adds it to the registry's list). The
// binary it makes is driven as a user would drive scaffold: the toy trains (its error falls),
// writes summary.json through the shared driver, is listed by `report`, and stops cleanly on a
// non-default signal with a restart.sh that resumes it. The real workloads stay listed beside it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::run_command;
using test::TempDir;

const std::string kToy = SCAFFOLD_TOY_BINARY;

fs::path write_config(const TempDir& dir) {
  const fs::path cfg = dir.path() / "toy.yml";
  std::ofstream(cfg) << "base_run_dir: " << (dir.path() / "runs").string() << "\nepochs: 6\n";
  return cfg;
}

double counter(const nlohmann::json& summary, const std::string& name) {
  for (const auto& c : summary.at("counters"))
    if (c.at("name") == name) return c.at("value").get<double>();
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(ToyWorkload, TrainsThroughTheDriverAndAppearsInReport) {
  TempDir dir;
  const fs::path cfg = write_config(dir);
  const auto help = run_command(kToy + " --help");
  for (const char* name : {"toy", "llm_training", "fno", "benchmark", "report"})
    EXPECT_NE(help.output.find(name), std::string::npos) << name << "\n" << help.output;

  const auto ran = run_command(kToy + " toy --threads 1 -c " + cfg.string());
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const fs::path run = test::only_run_dir(dir.path());
  for (const char* file : {"config.yaml", "restart.sh", "system.json", "toy_stats.csv"})
    EXPECT_TRUE(fs::exists(run / file)) << file;
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("workload"), "toy");
  EXPECT_EQ(s.at("status"), "completed");
  EXPECT_EQ(s.at("epochs"), 6);
  EXPECT_EQ(test::csv_rows(run / "toy_stats.csv").size(), 7u);  // header + 6 epochs
  // It learns the line: the error after the last epoch is well below the first epoch's.
  EXPECT_LT(counter(s, "val_mse"), 0.5 * counter(s, "first_val_mse"));

  const auto report = run_command(kToy + " report --format csv " + run.string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("Run,Epochs,val_mse"), std::string::npos) << report.output;
  EXPECT_NE(report.output.find(run.filename().string() + ",6,"), std::string::npos)
      << report.output;
  // The real scaffold has no table for it, and says so by name.
  const auto plain = run_command(test::kBinary + " report " + run.string());
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.output.find("\"toy\""), std::string::npos) << plain.output;
}

TEST(ToyWorkload, StopsCleanlyOnANonDefaultSignalAndRestartShResumes) {
  TempDir dir;
  const fs::path cfg = write_config(dir);
  const pid_t pid =
      test::spawn_binary(kToy, {"--stop-signals", "USR1", "toy", "--threads", "1", "--epochs",
                                "100000", "--step-delay-ms", "20", "-c", cfg.string()});
  ASSERT_GT(pid, 0);
  const fs::path run =
      test::wait_for_csv_lines(dir.path(), "toy_stats.csv", 3, std::chrono::seconds(60));
  ASSERT_FALSE(run.empty());
  const int status = test::signal_and_wait(pid, SIGUSR1);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("status"), "time_limit");
  const auto rows = test::csv_rows(run / "toy_stats.csv");
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " --epochs " +
                                   std::to_string(rows.size()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  const auto after = test::csv_rows(run / "toy_stats.csv");
  EXPECT_EQ(after.size(), rows.size() + 1);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(after[i], rows[i]) << "row " << i;
}

}  // namespace
}  // namespace scaffold
