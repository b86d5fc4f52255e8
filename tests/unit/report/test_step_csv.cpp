// A per-step CSV declared once (report/step_csv.hpp: StepCsvColumns) and kept by EpochLog: the
// header and lines follow the declaration (checked against text written here by hand, floats as
// Python's str() writes them), the reader gives back the rows written, refuses a bad cell naming
// its column and line, and applies the rule across rows; a resumed log keeps only the rows asked
// for and rewrites the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "report/epoch_log.hpp"
#include "report/step_csv.hpp"
#include "test_util.hpp"

namespace scaffold::report {
namespace {
namespace fs = std::filesystem;

struct Row {
  int64_t n = 0;
  bool warm = false;
  double x = 0.0;
};

// n must grow by one from row to row.
const StepCsvColumns<Row>& columns() {
  static const StepCsvColumns<Row> c(
      {integer_column("n", &Row::n, 1), flag_column("warm", &Row::warm),
       number_column("x", &Row::x, NumberRange::kFinite)},
      [](const StepCsvRow& cells, const Row& r, const std::vector<Row>& before) {
        if (!before.empty() && r.n != before.back().n + 1) cells.fail("n does not follow");
      });
  return c;
}

std::string error_of(const fs::path& file) {
  try {
    (void)columns().read(file);
  } catch (const core::FileError& e) {
    return e.what();
  }
  return "(no FileError)";
}

TEST(StepCsvColumns, HeaderAndLinesFollowTheDeclaration) {
  EXPECT_EQ(columns().header(), "n,warm,x");
  EXPECT_EQ(columns().line({3, true, 0.1}), "3,1,0.1");
  EXPECT_EQ(columns().line({4, false, 2.0}), "4,0,2.0");
  EXPECT_EQ(columns().line({5, false, 1e-05}), "5,0,1e-05");
}

TEST(StepCsvColumns, EpochLogWritesWhatTheReaderGivesBackAndResumesTheKeptRows) {
  test::TempDir dir;
  const fs::path file = dir.path() / "stats.csv";
  {
    EpochLog<Row> log(file, columns());
    log.append({1, true, 0.5});
    log.append({2, false, 0.25});
    log.append({3, false, 1.5});
  }
  EXPECT_EQ(core::read_file(file), "n,warm,x\n1,1,0.5\n2,0,0.25\n3,0,1.5\n");
  const std::vector<Row> rows = columns().read(file);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].n, 2);
  EXPECT_FALSE(rows[1].warm);
  EXPECT_EQ(rows[2].x, 1.5);

  EpochLog<Row> resumed(file, columns());
  resumed.resume([](const Row& r) { return r.n <= 2; });
  ASSERT_EQ(resumed.rows().size(), 2u);
  resumed.append({3, false, 0.75});
  EXPECT_EQ(core::read_file(file), "n,warm,x\n1,1,0.5\n2,0,0.25\n3,0,0.75\n");
}

TEST(StepCsvColumns, ABadCellAndABrokenRuleAreErrorsNamingTheLine) {
  test::TempDir dir;
  const fs::path bad_cell = dir.path() / "bad_cell.csv";
  core::write_file_atomic(bad_cell, "n,warm,x\n1,0,0.5\n2,0,abc\n");
  const std::string cell = error_of(bad_cell);
  EXPECT_NE(cell.find("line 3"), std::string::npos) << cell;
  EXPECT_NE(cell.find("x"), std::string::npos) << cell;

  const fs::path out_of_order = dir.path() / "out_of_order.csv";
  core::write_file_atomic(out_of_order, "n,warm,x\n2,0,0.5\n4,0,0.5\n");
  const std::string rule = error_of(out_of_order);
  EXPECT_NE(rule.find("line 3"), std::string::npos) << rule;
  EXPECT_NE(rule.find("n does not follow"), std::string::npos) << rule;

  const fs::path other_header = dir.path() / "other_header.csv";
  core::write_file_atomic(other_header, "n,x,warm\n1,0.5,0\n");
  EXPECT_NE(error_of(other_header), "(no FileError)");
}

TEST(StepCsvColumns, EpochsFollowRefusesAGapNamingBothEpochs) {
  const StepCsvColumns<Row> by_epoch({integer_column("n", &Row::n, 1)}, epochs_follow(&Row::n));
  test::TempDir dir;
  const fs::path good = dir.path() / "good.csv";
  core::write_file_atomic(good, "n\n1\n2\n3\n");
  EXPECT_EQ(by_epoch.read(good).size(), 3u);
  const fs::path gap = dir.path() / "gap.csv";
  core::write_file_atomic(gap, "n\n1\n3\n");
  try {
    (void)by_epoch.read(gap);
    ADD_FAILURE() << "a gap was accepted";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("epoch 3 after epoch 1 (epochs must follow each other)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace scaffold::report
