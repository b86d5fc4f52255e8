// The quickstart's promise, end to end (issue 16): `scaffold benchmark -c configs/quickstart.yml`,
// as scripts/quickstart runs it, trains to validation Dice >= 0.95, the default target, which the
// quickstart file does not set. Not reduced: the shipped config as it is (scale 5, 16 volumes, a
// 2-layer U-Net of base 16). Measured on this project's 2-core machine, shared and at load 8:
// 13 epochs both times, 109 s and 167 s wall (58 s and 86 s of CPU); the epoch cap below only
// keeps a broken build from training forever. The embedded default itself is checked against
// the literal 0.95 in tests/unit/config (ConfigTest.DefaultsAreScaffoldsWrittenOutInTheTest).
// Slow for a test, so it has its own executable and the ctest label `slow`.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;

// The target the quickstart promises (README, configs/quickstart.yml, scripts/quickstart) and
// ScaFFold's default (docs/config.md), written here rather than read from the code.
constexpr double kPromisedDice = 0.95;
const char* const kPromisedDiceText = "0.95";

TEST(Quickstart, ReachesValidationDiceOf095AsShipped) {
  const fs::path config = fs::path(SCAFFOLD_SOURCE_DIR) / "configs" / "quickstart.yml";
  // The promise rests on the default target: the file must not set one of its own.
  EXPECT_FALSE(
      std::regex_search(core::read_file(config), std::regex(R"((^|\n)\s*target_dice\s*:)")))
      << config << " sets target_dice; the quickstart promises the default";
  test::TempDir dir;
  // From an empty working directory, as a new user runs it (outputs land below it).
  const auto r = test::run_command("cd " + dir.path().string() + " && " + test::kBinary +
                                   " benchmark -c " + config.string() + " --threads 2 --epochs 40");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("target_dice=") + kPromisedDiceText + ","), std::string::npos)
      << "the run's target is not " << kPromisedDiceText << ":\n"
      << r.output;
  EXPECT_NE(r.output.find(std::string("Trained to >= ") + kPromisedDiceText +
                          " validation dice score in"),
            std::string::npos)
      << r.output;

  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(dir.path() / "benchmark_runs"))
    runs.push_back(e.path());
  ASSERT_EQ(runs.size(), 1u);
  const auto rows = test::csv_rows(runs[0] / "train_stats.csv");
  ASSERT_GE(rows.size(), 2u);
  EXPECT_GE(std::stod(rows.back()[6]), kPromisedDice) << "the last epoch's val_dice";
  for (std::size_t i = 1; i + 1 < rows.size(); ++i)
    EXPECT_LT(std::stod(rows[i][6]), kPromisedDice)
        << "row " << i << " reached the target but training went on";
  const auto summary = nlohmann::json::parse(core::read_file(runs[0] / "summary.json"));
  EXPECT_EQ(summary.at("status").get<std::string>(), "reached_target");
  EXPECT_EQ(summary.at("params").at("target_dice").get<std::string>(), kPromisedDiceText);
  std::printf("quickstart: %zu epochs to val_dice %s, %s s of training\n", rows.size() - 1,
              rows.back()[6].c_str(), summary.at("time_s").dump().c_str());
}

}  // namespace
}  // namespace scaffold
