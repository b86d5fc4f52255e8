// CARAML's stdout lines (workloads/image_classification/caraml_output): the expected text is
// written here by hand from image_classification_torch.py's print0 calls and from what Python
// prints for them (np.round(x, 3) through an f-string; tabulate's "grid" format with floatfmt
// (".0f", ".0f", ".3f")), not produced by the code under test.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "workloads/image_classification/caraml_output.hpp"

namespace scaffold::imgcls {
namespace {

EpochRow row(int64_t epoch, bool warmup, double duration_s, int64_t train_images = 8960,
             int64_t val_images = 1000) {
  EpochRow r;
  r.epoch = epoch;
  r.warmup = warmup;
  r.duration_s = duration_s;
  r.train_images = train_images;
  r.val_images = val_images;
  return r;
}

TEST(CaramlOutput, SecondsAsPythonPrintsNpRoundTo3) {
  EXPECT_EQ(caraml_seconds(12.34567), "12.346");
  EXPECT_EQ(caraml_seconds(2.5), "2.5");  // repr(2.5)
  EXPECT_EQ(caraml_seconds(2.0), "2.0");  // repr(2.0), not "2"
  EXPECT_EQ(caraml_seconds(0.0004), "0.0");
  EXPECT_EQ(caraml_seconds(0.1), "0.1");
  EXPECT_EQ(caraml_seconds(1234.0006), "1234.001");
}

TEST(CaramlOutput, LinesWordedAsCaramlsPrints) {
  // image_classification_torch.py: print0(f'Creating datasets took {np.round(time.time()-
  // data_time,3)} s')
  EXPECT_EQ(caraml_datasets_line(0.01234), "Creating datasets took 0.012 s");
  // print0(f'Starting training with {images_per_epoch} images...')
  EXPECT_EQ(caraml_starting_line(10000), "Starting training with 10000 images...");
  // print0(f'Starting warm-up epochs ...')
  EXPECT_EQ(caraml_warmup_start_line(), "Starting warm-up epochs ...");
  // print0(f'End of warm-up epochs (took {np.round(time.time()-warmup_time,3)} s)...')
  EXPECT_EQ(caraml_warmup_end_line(61.5), "End of warm-up epochs (took 61.5 s)...");
  // print0(f'Training for {args.epochs} epoch(s) took {np.round(time.time()-train_time,3)} s')
  EXPECT_EQ(caraml_training_line(100, 1234.5678), "Training for 100 epoch(s) took 1234.568 s");
  // print0(f'Average Images/s: {int(np.mean(images_per_sec))}'): int() truncates
  EXPECT_EQ(caraml_average_line(8123.999), "Average Images/s: 8123");
  EXPECT_EQ(caraml_average_line(0.7), "Average Images/s: 0");
}

TEST(CaramlOutput, GridTableKeepsEveryTenthTimedEpochAndTheLast) {
  // 2 warm-up epochs (skipped), then 12 timed ones; rows for timed epochs 10 and 12.
  std::vector<EpochRow> rows{row(1, true, 9.0), row(2, true, 9.0)};
  for (int64_t e = 1; e <= 12; ++e) rows.push_back(row(e + 2, false, 2.0));
  rows[11].duration_s = 1.25;  // timed epoch 10: 9960 / 1.25 = 7968 images/s
  rows[13].duration_s = 3.0;   // timed epoch 12: 9960 / 3 = 3320 images/s
  const std::string expected =
      "+---------+------------+------------+\n"
      "|   Epoch |   Images/s |   Time (s) |\n"
      "+=========+============+============+\n"
      "|      10 |       7968 |      1.250 |\n"
      "+---------+------------+------------+\n"
      "|      12 |       3320 |      3.000 |\n"
      "+---------+------------+------------+\n";
  EXPECT_EQ(caraml_grid_table(rows), expected);
}

TEST(CaramlOutput, GridTableWidensForWideNumbersAndIsEmptyWithoutTimedEpochs) {
  // 123456789012 images in 0.5 s: 246913578024 images/s, 12 characters, wider than the header + 2.
  const std::vector<EpochRow> rows{row(1, false, 0.5, 123456789012, 0)};
  const std::string expected =
      "+---------+--------------+------------+\n"
      "|   Epoch |     Images/s |   Time (s) |\n"
      "+=========+==============+============+\n"
      "|       1 | 246913578024 |      0.500 |\n"
      "+---------+--------------+------------+\n";
  EXPECT_EQ(caraml_grid_table(rows), expected);
  EXPECT_EQ(caraml_grid_table({row(1, true, 1.0)}), "");
}

// CARAML's JUBE pattern (image_classification_torch_benchmark.xml, patternset "pattern":
// `Average Images/s: ${jube_pat_fp}`) with $jube_pat_fp expanded to JUBE's definition
// (jube2/pattern.py, get_jube_pattern) finds the average line and reads its number.
TEST(CaramlOutput, JubePatternReadsTheAverageLine) {
  const std::regex pattern(R"(Average Images/s: ([+-]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|\d+\.)))");
  std::smatch m;
  const std::string line = caraml_average_line(8123.9);
  ASSERT_TRUE(std::regex_search(line, m, pattern)) << line;
  EXPECT_EQ(m[1], "8123");
}

}  // namespace
}  // namespace scaffold::imgcls
