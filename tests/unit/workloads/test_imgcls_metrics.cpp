// CARAML's image-classification figures on hand-made epoch rows: images/s = (train + val images)
// / epoch time, averaged over the timed epochs only; training images/s; FLOP rate; energy per
// image; and epoch_stats.csv read back, with malformed files named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "test_util.hpp"
#include "workloads/image_classification/metrics.hpp"

namespace scaffold::imgcls {
namespace {

std::vector<EpochRow> fixture_rows() {
  // Epoch 1 is a warm-up epoch (much slower: it must not count). Timed: 10 000 images per epoch
  // in 20 s, 25 s and 40 s: 500, 400 and 250 images/s; training 9 000 images in 18, 20, 30 s.
  std::vector<EpochRow> rows(4);
  const double duration[4] = {100.0, 20.0, 25.0, 40.0};
  const double train[4] = {90.0, 18.0, 20.0, 30.0};
  for (int i = 0; i < 4; ++i) {
    rows[i].epoch = i + 1;
    rows[i].warmup = i == 0;
    rows[i].duration_s = duration[i];
    rows[i].train_s = train[i];
    rows[i].validation_s = duration[i] - train[i];
    rows[i].train_images = 9000;
    rows[i].val_images = 1000;
    rows[i].val_top1 = 0.1 * i;
    rows[i].val_top5 = 0.2 * i;
  }
  return rows;
}

TEST(ImageClassificationFigures, FollowCaramlsDefinitionsOverTheTimedEpochs) {
  const auto f = image_classification_figures(fixture_rows(), 1e9, 2.5);
  EXPECT_EQ(f.timed_epochs, 3);
  EXPECT_DOUBLE_EQ(f.time_s, 85.0);
  EXPECT_DOUBLE_EQ(f.images_per_s.mean,
                   (500.0 + 400.0 + 250.0) / 3.0);  // CARAML's Average Images/s
  EXPECT_DOUBLE_EQ(f.images_per_s.median, 400.0);
  EXPECT_DOUBLE_EQ(f.images_per_s.min, 250.0);
  EXPECT_DOUBLE_EQ(f.images_per_s.max, 500.0);
  EXPECT_DOUBLE_EQ(f.train_images_per_s.median,
                   450.0);  // 9000/18 = 500, 9000/20 = 450, 9000/30 = 300
  EXPECT_EQ(f.images, 30000);
  EXPECT_DOUBLE_EQ(f.val_top1, 0.30000000000000004);
  // (3 x 27 000 training + 3 000 validation images) x 1 GFLOP / 85 s.
  EXPECT_DOUBLE_EQ(f.achieved_flop_per_s, (3.0 * 27000 + 3000) * 1e9 / 85.0);
  ASSERT_TRUE(f.images_per_wh.has_value());
  EXPECT_DOUBLE_EQ(*f.images_per_wh, 30000 / 2.5);
  EXPECT_DOUBLE_EQ(*f.j_per_image, 2.5 * 3600 / 30000);
  EXPECT_FALSE(
      image_classification_figures(fixture_rows(), 1e9, std::nullopt).images_per_wh.has_value());
}

TEST(ImageClassificationFigures, NoTimedEpochIsAnError) {
  auto rows = fixture_rows();
  for (auto& r : rows) r.warmup = true;
  EXPECT_THROW(image_classification_figures(rows, 1.0, std::nullopt), core::Error);
}

TEST(EpochStatsCsv, RoundTripsAndNamesTheBadLine) {
  test::TempDir dir;
  const auto file = dir.path() / kEpochStatsFileName;
  std::string text = epoch_stats_header() + "\n";
  for (const auto& r : fixture_rows()) text += epoch_stats_line(r) + "\n";
  std::ofstream(file) << text;
  const auto back = read_epoch_stats(file);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_TRUE(back[0].warmup);
  EXPECT_EQ(back[3].train_images, 9000);
  EXPECT_DOUBLE_EQ(back[3].duration_s, 40.0);

  std::ofstream(file) << text << "6,0,1,1,1,1,1,1,-3,1,1,1,1,1\n";
  try {
    read_epoch_stats(file);
    FAIL() << "no error for a negative duration and a missing epoch";
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("line 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  std::ofstream(file) << "epoch,x\n";
  EXPECT_THROW(read_epoch_stats(file), core::FileError);
}

}  // namespace
}  // namespace scaffold::imgcls
