// What the fractal library reads back is checked (issue 16, items 5 and 9): a category CSV with
// impossible values is refused naming the file, the line and the rule; an instance cloud with a
// NaN, an Inf or a runaway point is refused naming the point; and the clean-up of a library
// removes the temporaries of dead writers only. The CSV texts are written out by hand here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "fs_test_util.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"
#include "workloads/scaffold/fractal/library.hpp"

namespace scaffold::fractal {
namespace {
namespace fs = std::filesystem;

// Two maps: diagonal matrices, translations, then the probability (column 13).
std::string csv(const std::string& p0, const std::string& p1, const std::string& tail = "") {
  return "0.5,0,0,0,0.5,0,0,0,0.5,0.1,0.2,0.3," + p0 + "\n" + "0.4,0,0,0,0.4,0,0,0,0.4,-0.1,0,0," +
         p1 + "\n" + tail;
}

std::string error_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const core::FileError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part)                                                                \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" \
                                                             << (text)

TEST(LibraryChecks, CategoryCsvWithPossibleValuesIsRead) {
  const IfsParams p = category_from_csv(csv("0.6", "0.4"), "c.csv");
  EXPECT_EQ(p.maps[0][kProbabilityColumn], 0.6);
  EXPECT_EQ(p.maps[1][9], -0.1);
  // One map never picked is a distribution still; blank lines and CRLF are allowed.
  EXPECT_NO_THROW(category_from_csv(csv("1", "0"), "c.csv"));
  EXPECT_NO_THROW(category_from_csv("\r\n" + csv("0.25", "0.75"), "c.csv"));
}

TEST(LibraryChecks, CategoryCsvWithImpossibleValuesNamesFileLineAndRule) {
  EXPECT_CONTAINS(
      error_of([] { category_from_csv(csv("-0.5", "1.5"), "/lib/000003.csv"); }),
      "/lib/000003.csv: line 1, value 13 (the probability of map 0): -0.5 is outside [0, 1]");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("0.5", "1.25"), "c.csv"); }),
                  "c.csv: line 2, value 13 (the probability of map 1): 1.25 is outside [0, 1]");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("0.5", "0.25"), "c.csv"); }),
                  "c.csv: lines 1 and 2, value 13: the map probabilities sum to 0.75, not 1");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("nan", "0.5"), "c.csv"); }),
                  "c.csv: line 1, value 13: expected a finite number");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("0.5", "inf"), "c.csv"); }),
                  "c.csv: line 2, value 13: expected a finite number");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("0.5", "0.5,7"), "c.csv"); }),
                  "c.csv: line 2 has 14 values, expected 13");
  // The line counts blank lines: the editor's line number.
  EXPECT_CONTAINS(error_of([] { category_from_csv("\n\n" + csv("0.5", "-0.5"), "c.csv"); }),
                  "c.csv: line 4,");
  EXPECT_CONTAINS(error_of([] { category_from_csv(csv("0.5", "0.5", "1,2\n"), "c.csv"); }),
                  "c.csv: line 3 has 2 values, expected 13");
}

TEST(LibraryChecks, ReadCategoryGivesTheReasonAndNoParams) {
  test::TempDir dir;
  const fs::path file = dir.path() / "000000.csv";
  std::ofstream(file) << csv("-0.1", "1.1");
  std::string why;
  EXPECT_FALSE(read_category(file, &why));
  EXPECT_CONTAINS(why, file.string() + ": line 1, value 13");
}

TEST(LibraryChecks, InstancePointsMustBeWhatTheGeneratorWrites) {
  const fs::path file = "/lib/instances/np4/000001/000001_0007.npy";
  std::vector<float> cloud{0, 0, 0, 0.5f, -1.5f, 2, 3, 4, 5, -6, 7, 8};  // (4, 3)
  EXPECT_NO_THROW(check_instance_points(file, {4, 3}, cloud.data(), 4));
  EXPECT_CONTAINS(error_of([&] {
                    check_instance_points(file, {3, 3}, cloud.data(), 4);
                  }),
                  file.string() + ": expected a cloud of shape (4, 3), found (3, 3)");
  EXPECT_CONTAINS(error_of([&] {
                    check_instance_points(file, {4, 3, 1}, cloud.data(), 4);
                  }),
                  "found (4, 3, 1)");

  auto bad = cloud;
  bad[7] = std::numeric_limits<float>::quiet_NaN();  // point 2, y
  EXPECT_CONTAINS(error_of([&] {
                    check_instance_points(file, {4, 3}, bad.data(), 4);
                  }),
                  file.string() + ": point 2 is (3, nan, 5)");
  bad = cloud;
  bad[11] = -std::numeric_limits<float>::infinity();  // point 3, z
  EXPECT_CONTAINS(error_of([&] {
                    check_instance_points(file, {4, 3}, bad.data(), 4);
                  }),
                  "point 3 is (-6, 7, -inf)");
  bad = cloud;
  bad[3] = 2e10f;  // beyond the runaway bound: such a cloud is retried, never saved
  EXPECT_CONTAINS(error_of([&] {
                    check_instance_points(file, {4, 3}, bad.data(), 4);
                  }),
                  "point 1 is (20000000000, -1.5, 2): generate_fractals writes finite coordinates "
                  "of magnitude at most 1e10");
  bad[3] = 1e10f;  // at the bound: not a runaway
  EXPECT_NO_THROW(check_instance_points(file, {4, 3}, bad.data(), 4));
}

// A killed writer's temporary (its pid gone) is removed at once; one whose writer still holds it
// stays, and is counted; final names are never touched.
TEST(LibraryChecks, CleanUpRemovesOnlyTemporariesOfGoneWriters) {
  test::TempDir dir;
  const fs::path sub = dir.path() / "instances" / "np128" / "000000";
  core::create_directories(sub);
  const std::string host = core::owner_host();
  const fs::path dead =
      sub / ("000000_0001.npy.tmp." + std::to_string(test::dead_pid()) + "@" + host + ".0");
  const fs::path live = sub / ("000000_0002.npy.tmp.1@" + host + ".0");
  const fs::path done = sub / "000000_0003.npy";
  for (const fs::path& p : {dead, live, done}) std::ofstream(p) << "x";
  test::LockHolder writer(live);
  ASSERT_TRUE(writer.held());
  fs::rename(live,
             sub / ("000000_0002.npy.tmp." + std::to_string(writer.pid()) + "@" + host + ".0"));
  const fs::path live_named =
      sub / ("000000_0002.npy.tmp." + std::to_string(writer.pid()) + "@" + host + ".0");

  const TemporaryScan scan = remove_temporary_files(dir.path());
  EXPECT_EQ(scan.removed, 1u);
  EXPECT_EQ(scan.kept, 1u);
  EXPECT_EQ(scan.example, live_named);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live_named));
  EXPECT_TRUE(fs::exists(done));

  writer.stop();  // the writer dies: its temporary goes with the next clean-up
  EXPECT_EQ(remove_temporary_files(dir.path()).removed, 1u);
  EXPECT_FALSE(fs::exists(live_named));
  EXPECT_TRUE(fs::exists(done));
}

TEST(LibraryChecks, TheLockSitsNextToTheSeedsLibrary) {
  const LibraryLayout layout = library_layout("/base", 0.15, 7, 128);
  EXPECT_EQ(layout.lock_file(), fs::path("/base/var0.15/seed7.lock"));
}

}  // namespace
}  // namespace scaffold::fractal
