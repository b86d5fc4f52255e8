// The registry (workloads/registry.cpp): the binary's suite workloads in their fixed order, each
// with a result table of its own name and a subcommand that takes the flags every workload has;
// and the workloads' tools. The expected names and column counts are written here by hand.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "workloads/registry.hpp"

namespace scaffold {
namespace {

TEST(WorkloadRegistry, ListsTheSuiteWorkloadsInOrderWithTheirTables) {
  const std::vector<suite::Workload> list = workloads::suite_workloads();
  std::vector<std::string> names;
  for (const suite::Workload& w : list) names.push_back(w.name);
#ifdef SCAFFOLD_TEST_WITH_IMAGE_CLASSIFICATION
  EXPECT_EQ(names,
            (std::vector<std::string>{"benchmark", "image_classification", "llm_training", "fno"}));
#else
  EXPECT_EQ(names, (std::vector<std::string>{"benchmark", "llm_training", "fno"}));
#endif
  for (const suite::Workload& w : list) {
    // The ScaFFold benchmark's scaling table is report's own (report/table.hpp).
    if (w.name == "benchmark") {
      EXPECT_FALSE(w.table.has_value());
      continue;
    }
    ASSERT_TRUE(w.table.has_value()) << w.name;
    EXPECT_EQ(w.table->workload, w.name);
    EXPECT_FALSE(w.table->columns.empty()) << w.name;
    if (w.name == "fno") {
      EXPECT_EQ(w.table->columns.size(), 43u);
    }
    if (w.name == "image_classification") {
      EXPECT_EQ(w.table->columns.size(), 27u);
    }
  }
}

TEST(WorkloadRegistry, EachWorkloadAddsItsSubcommandWithTheCommonFlags) {
  CLI::App app;
  char arg0[] = "scaffold";
  char* argv[] = {arg0};
  for (const suite::Workload& w : workloads::suite_workloads()) {
    const cli::Subcommand sub = w.add_subcommand(app, 1, argv);
    ASSERT_NE(sub.app, nullptr);
    EXPECT_EQ(sub.app->get_name(), w.name);
    EXPECT_TRUE(static_cast<bool>(sub.run)) << w.name;
    for (const char* flag : {"--config", "--threads", "--run-dir", "--restart", "--seed",
                             "--device", "--base-run-dir", "--progress-timeout-s"})
      EXPECT_NO_THROW((void)sub.app->get_option(flag)) << w.name << " " << flag;
  }
}

// A workload's own flags and its keys without a flag (cli::SubcommandExtras): the benchmark's
// --allow-large-data reaches its run as a switch, and ScaFFold's fixed keys take no flag.
TEST(WorkloadRegistry, TheBenchmarkHasItsOwnFlagAndNoFlagForItsFixedKeys) {
  CLI::App app;
  char arg0[] = "scaffold";
  char* argv[] = {arg0};
  for (const suite::Workload& w : workloads::suite_workloads()) {
    if (w.name != "benchmark") continue;
    const cli::Subcommand sub = w.add_subcommand(app, 1, argv);
    EXPECT_NO_THROW((void)sub.app->get_option("--allow-large-data"));
    for (const char* fixed : {"--framework", "--dist", "--loss-freq"})
      EXPECT_THROW((void)sub.app->get_option(fixed), CLI::OptionNotFound) << fixed;
    EXPECT_NO_THROW((void)sub.app->get_option("--problem-scale"));
    return;
  }
  FAIL() << "no benchmark in the registry";
}

TEST(WorkloadRegistry, AddsTheWorkloadsTools) {
  CLI::App app;
  std::set<std::string> names;
  for (const auto& add : workloads::workload_tools()) names.insert(add(app).app->get_name());
  EXPECT_EQ(names, (std::set<std::string>{"generate_fractals", "generate_dataset",
                                          "generate_pde_data", "preprocess_data"}));
}

}  // namespace
}  // namespace scaffold
