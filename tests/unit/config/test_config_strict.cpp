// The config loader against hostile text: what a strict YAML parser (libyaml, as PyYAML and so
// ScaFFold read configs) rejects is an error naming the file and the line to fix; an empty file
// is an error; size, alias expansion and nesting are bounded. The lines expected here are
// counted by hand from the text of each case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/yaml_strict.hpp"
#include "core/error.hpp"
#include "workloads/scaffold/options.hpp"
#include "workloads/scaffold/schema.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;

class StrictConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("scaffold_test_strict_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  // The error text of loading `path`; fails the test when it loads.
  static std::string error_of(const std::string& path) {
    try {
      const LoadedConfig loaded = load_config(LoadRequest{{path}, {}, false});
      ADD_FAILURE() << path << " loaded (seed " << loaded.config.seed << ", problem_scale "
                    << loaded.config.problem_scale << ")";
    } catch (const core::Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

#define EXPECT_CONTAINS(text, part)                                                                \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" \
                                                             << (text)

struct BadText {
  const char* name;
  const char* text;
  const char* where;  // ":line" (or ":line:col") the message must name, counted by hand
};

// Each of these is rejected by PyYAML (pure Python and libyaml loaders alike). The first two are
// the ones yaml-cpp 0.7 alone accepts, silently dropping problem_scale (and everything after).
const std::vector<BadText> kBadTexts = {
    {"unclosed_double", "seed: 3\nbase_run_dir: \"runs/a\nproblem_scale: 7\n", "line 2"},
    {"unclosed_single", "seed: 3\nbase_run_dir: 'runs/a\nproblem_scale: 7\n", "line 2"},
    {"unclosed_at_top", "\"seed: 3\nproblem_scale: 7\n", "line 1"},
    {"unclosed_flow_list", "seed: 3\ndc_shard_dims: [2, 3\nproblem_scale: 7\n", "line 2"},
    {"value_in_value", "seed: 3\nproblem_scale: 7: 8\n", ":2:"},
    {"bad_indent", "seed: 3\n  problem_scale: 7\n", ":2:"},
    {"tab_indent", "seed: 3\n\tproblem_scale: 7\n", ":2:"},
    {"bad_escape", "seed: 3\nbase_run_dir: \"a\\qb\"\n", ":2:"},
    {"reserved_char", "seed: 3\nbase_run_dir: @a\n", ":2:"},
    {"content_after_end", "seed: 3\n...\nproblem_scale: 7\n", ":3:"},
    {"undefined_alias", "seed: &s 3\nproblem_scale: *t\n", ":2:"},
};

TEST_F(StrictConfigTest, StrictSyntaxErrorsNameFileAndLine) {
  for (const BadText& bad : kBadTexts) {
    SCOPED_TRACE(bad.name);
    const std::string path = write(std::string(bad.name) + ".yml", bad.text);
    const std::string message = error_of(path);
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, bad.where);
    EXPECT_CONTAINS(message, "YAML syntax error");
  }
}

// The same text without the defect loads, with the key the defect would have lost: the strict
// pass refuses only the defect.
TEST_F(StrictConfigTest, ClosedQuotesKeepEveryKey) {
  const std::string path = write("ok.yml", "seed: 3\nbase_run_dir: \"runs/a\"\nproblem_scale: 7\n");
  const LoadedConfig loaded = load_config(LoadRequest{{path}, {}, false});
  EXPECT_EQ(loaded.config.seed, 3);
  EXPECT_EQ(loaded.config.base_run_dir, "runs/a");
  EXPECT_EQ(loaded.config.problem_scale, 7);
}

TEST_F(StrictConfigTest, EveryShippedConfigPassesTheStrictPass) {
  for (const auto& entry : fs::directory_iterator(fs::path(SCAFFOLD_SOURCE_DIR) / "configs")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(strict_yaml_problem(text, entry.path().string()), "") << entry.path();
  }
}

TEST_F(StrictConfigTest, FileThatSetsNoKeysIsAnError) {
  for (const char* text : {"", "# only a comment\n", "{}\n", "---\n...\n"}) {
    SCOPED_TRACE(text);
    const std::string path = write("empty.yml", text);
    EXPECT_CONTAINS(error_of(path), path + ": the file sets no keys");
  }
}

// A short use of an anchor is fine; nested aliases that expand to 10^9 values in under 1 KiB are
// refused by counting, quickly and naming the line where the count passed the cap.
TEST_F(StrictConfigTest, AliasesAreExpandedByCountNotByMemory) {
  const std::string ok = write("anchor.yml", "seed: &s 11\nn_categories: *s\n");
  EXPECT_EQ(load_config(LoadRequest{{ok}, {}, false}).config.n_categories, 11);

  std::string laughs = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string p = "*l" + std::to_string(i - 1);
    laughs += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + p;
    for (int k = 1; k < 10; ++k) laughs += ", " + p;
    laughs += "]\n";
  }
  ASSERT_LT(laughs.size(), 1024u);
  const std::string path = write("laughs.yml", laughs);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of(path);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
  EXPECT_CONTAINS(message, path + ":");
  EXPECT_CONTAINS(message, "aliases");
  // l0 holds 11 nodes (its list and 10 scalars), l1 111, l2 1111, l3 11111, l4 111111: the cap
  // of 100000 is passed inside l4's list, on line 5.
  EXPECT_CONTAINS(message, path + ":5:");
}

TEST_F(StrictConfigTest, DeepNestingNamedNotBadFile) {
  const std::string path = write("deep.yml", "seed: 1\nproblem_scale: " + std::string(5000, '[') +
                                                 std::string(5000, ']') + "\n");
  const std::string message = error_of(path);
  EXPECT_CONTAINS(message, path + ":2: values nested more than 32 levels deep");
  EXPECT_EQ(message.find("bad file"), std::string::npos) << message;
}

TEST_F(StrictConfigTest, SizeIsCappedEvenForEndlessFiles) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error_of("/dev/zero"), "/dev/zero: larger than 1048576 bytes");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  // A file just over the cap is refused; one at the cap is read (here: comments and one key).
  std::string big = "seed: 2\n#" + std::string(kMaxConfigBytes - 10, 'x') + "\n";
  ASSERT_EQ(big.size(), kMaxConfigBytes);
  EXPECT_EQ(load_config(LoadRequest{{write("at_cap.yml", big)}, {}, false}).config.seed, 2);
  big.insert(big.size() - 1, "x");
  EXPECT_CONTAINS(error_of(write("over.yml", big)), "larger than 1048576 bytes");
  // Broadcast text (from_yaml_text) goes through the same cap.
  EXPECT_THROW(config_from_yaml_text(big, "broadcast"), core::Error);
}

// variance_threshold at or above normalize^2 can never be met (a cloud normalised to
// [-normalize, normalize] has a per-axis variance of at most normalize^2): refused, naming both
// keys (issue 16, item 3). Just below the bound is a valid setting.
TEST_F(StrictConfigTest, UnreachableVarianceThresholdIsRefused) {
  const std::string message = error_of(write("v.yml", "variance_threshold: 1.0\nnormalize: 1.0\n"));
  EXPECT_CONTAINS(message, "variance_threshold = 1.0: expected a number below normalize^2 = 1.0");
  EXPECT_CONTAINS(message, "normalize = 1.0 from");
  EXPECT_CONTAINS(error_of(write("w.yml", "variance_threshold: 4.5\nnormalize: 2\n")),
                  "below normalize^2 = 4.0");
  EXPECT_EQ(
      load_config(
          LoadRequest{{write("ok.yml", "variance_threshold: 3.9\nnormalize: 2\n")}, {}, false})
          .config.variance_threshold,
      3.9);
}

}  // namespace
}  // namespace scaffold::config
