// The image-classification figures, by CARAML's definitions (docs/image_classification.md), from
// the rows of epoch_stats.csv: images/s of an epoch = (training + validation images) / epoch wall
// time, CARAML's "Average Images/s" = the mean over the timed epochs (warm-up epochs excluded by
// name); we add the median and spread, training images/s = training images / training time, model
// FLOP rates and energy per image. No LibTorch: the report and the tests use it on plain rows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/step_csv.hpp"

namespace scaffold::imgcls {

inline constexpr const char* kEpochStatsFileName = "epoch_stats.csv";

// One row of epoch_stats.csv.
struct EpochRow {
  int64_t epoch = 0;
  bool warmup = false;
  double train_loss = 0.0, train_top1 = 0.0, val_loss = 0.0, val_top1 = 0.0,
         val_top5 = 0.0;    // fractions
  double lr = 0.0;          // the learning rate of this epoch
  double duration_s = 0.0;  // training + validation + LR step
  double train_s = 0.0, validation_s = 0.0;
  int64_t train_images = 0, val_images = 0;  // over all replicas
  double median_step_s = 0.0;                // rank 0's median training step
};

// The columns of epoch_stats.csv, declared once: its header, lines and reader follow from them.
const report::StepCsvColumns<EpochRow>& epoch_stats_columns();
std::string epoch_stats_header();
std::string epoch_stats_line(const EpochRow& row);
// Parses epoch_stats.csv; a different header or a malformed row is a core::FileError naming the
// file and line.
std::vector<EpochRow> read_epoch_stats(const std::filesystem::path& path);

struct Spread {
  double mean = 0.0, median = 0.0, min = 0.0, max = 0.0;
};

struct ImageClassificationFigures {
  int64_t timed_epochs = 0;
  double time_s = 0.0;        // sum of the timed epochs' durations
  Spread images_per_s;        // CARAML: (train + val images) / epoch duration, per timed epoch
  Spread train_images_per_s;  // training images / training time, per timed epoch
  int64_t images = 0;         // training + validation images of the timed epochs
  double val_top1 = 0.0, val_top5 = 0.0;  // of the last epoch
  double achieved_flop_per_s = 0.0;       // (3 F train images + F val images) / time_s
  std::optional<double> images_per_wh, j_per_image;
};

// `rows`: every epoch (warm-up ones are skipped); `forward_flops_per_image`: F; `energy_wh`: the
// timed epochs' energy, when measured. Throws core::Error when there is no timed epoch.
ImageClassificationFigures image_classification_figures(const std::vector<EpochRow>& rows,
                                                        double forward_flops_per_image,
                                                        std::optional<double> energy_wh);

}  // namespace scaffold::imgcls
