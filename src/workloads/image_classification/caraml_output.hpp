// The lines CARAML's trainer prints on stdout (image_classification_torch.py, rank 0's print0
// calls), worded as CARAML words them, so that CARAML's JUBE pattern `Average Images/s:
// ${jube_pat_fp}` and anyone reading a CARAML log find the same lines in ours. The wording, the
// source of each line and the definitions of the numbers: docs/image_classification.md, "Lines on
// stdout". No LibTorch: the unit tests check the text against hand-written expectations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/image_classification/metrics.hpp"

namespace scaffold::imgcls {

// A number of seconds as CARAML prints np.round(x, 3): rounded to 3 decimals, then Python's
// shortest repr of the float ("0.123", "2.5", "2.0").
std::string caraml_seconds(double s);

// "Creating datasets took <s> s"
std::string caraml_datasets_line(double seconds);
// "Starting training with <n> images..." (n: training + validation images, CARAML's len(dataset))
std::string caraml_starting_line(int64_t images);
// "Starting warm-up epochs ..."
std::string caraml_warmup_start_line();
// "End of warm-up epochs (took <s> s)..."
std::string caraml_warmup_end_line(double seconds);
// "Training for <n> epoch(s) took <s> s"
std::string caraml_training_line(int64_t epochs, double seconds);
// CARAML's tabulate(results, headers=["Epoch", "Images/s", "Time (s)"], tablefmt="grid",
// floatfmt=(".0f", ".0f", ".3f")): a row for every 10th timed epoch and the last one, numbered
// 1.. from the first timed epoch; Images/s = (training + validation images) / epoch duration.
// Warm-up rows are skipped. Several lines, each ending in '\n'; "" without a timed row.
std::string caraml_grid_table(const std::vector<EpochRow>& rows);
// "Average Images/s: <int(mean images/s)>" (Python's int(): truncated towards zero)
std::string caraml_average_line(double mean_images_per_s);

}  // namespace scaffold::imgcls
