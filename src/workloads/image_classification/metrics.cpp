#include "workloads/image_classification/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "report/step_csv.hpp"

namespace scaffold::imgcls {

namespace {

using report::NumberRange;

// The columns of epoch_stats.csv, in order.
const std::vector<std::string>& epoch_stats_columns() {
  static const std::vector<std::string> columns{
      "epoch",        "warmup",       "train_loss", "train_top1",   "val_loss",
      "val_top1",     "val_top5",     "lr",         "duration_s",   "train_s",
      "validation_s", "train_images", "val_images", "median_step_s"};
  return columns;
}

}  // namespace

std::string epoch_stats_header() {
  return report::step_csv_header(epoch_stats_columns());
}

std::string epoch_stats_line(const EpochRow& r) {
  auto f = [](double v) { return core::python_float_str(v); };
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}", r.epoch, r.warmup ? 1 : 0,
                     f(r.train_loss), f(r.train_top1), f(r.val_loss), f(r.val_top1), f(r.val_top5),
                     f(r.lr), f(r.duration_s), f(r.train_s), f(r.validation_s), r.train_images,
                     r.val_images, f(r.median_step_s));
}

std::vector<EpochRow> read_epoch_stats(const std::filesystem::path& path) {
  std::vector<EpochRow> rows;
  report::read_step_csv(path, epoch_stats_columns(), [&](const report::StepCsvRow& row) {
    EpochRow r;
    r.epoch = row.integer(0, 1);
    r.warmup = row.flag(1);
    r.train_loss = row.number(2, NumberRange::kAny);  // a diverged epoch keeps its nan
    r.train_top1 = row.number(3, NumberRange::kFraction);
    r.val_loss = row.number(4, NumberRange::kAny);
    r.val_top1 = row.number(5, NumberRange::kFraction);
    r.val_top5 = row.number(6, NumberRange::kFraction);
    r.lr = row.number(7, NumberRange::kFinite);
    r.duration_s = row.number(8, NumberRange::kFinite);
    r.train_s = row.number(9, NumberRange::kFinite);
    r.validation_s = row.number(10, NumberRange::kFinite);
    r.train_images = row.integer(11, 0);
    r.val_images = row.integer(12, 0);
    r.median_step_s = row.number(13, NumberRange::kFinite);
    if (!rows.empty() && r.epoch != rows.back().epoch + 1)
      row.fail(fmt::format("epoch {} after epoch {} (epochs must follow each other)", r.epoch,
                           rows.back().epoch));
    rows.push_back(r);
  });
  return rows;
}

namespace {
Spread spread_of(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = core::median(v);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}
}  // namespace

ImageClassificationFigures image_classification_figures(const std::vector<EpochRow>& rows,
                                                        double forward_flops_per_image,
                                                        std::optional<double> energy_wh) {
  ImageClassificationFigures f;
  std::vector<double> per_epoch, train_per_epoch;
  double train_images = 0.0, val_images = 0.0;
  for (const EpochRow& r : rows) {
    if (r.warmup) continue;
    ++f.timed_epochs;
    f.time_s += r.duration_s;
    const double images = static_cast<double>(r.train_images + r.val_images);
    per_epoch.push_back(r.duration_s > 0 ? images / r.duration_s : 0.0);
    train_per_epoch.push_back(r.train_s > 0 ? static_cast<double>(r.train_images) / r.train_s
                                            : 0.0);
    train_images += static_cast<double>(r.train_images);
    val_images += static_cast<double>(r.val_images);
    f.val_top1 = r.val_top1;
    f.val_top5 = r.val_top5;
  }
  if (f.timed_epochs == 0) throw core::Error("no timed epoch: every epoch was a warm-up epoch");
  f.images_per_s = spread_of(per_epoch);
  f.train_images_per_s = spread_of(train_per_epoch);
  f.images = static_cast<int64_t>(train_images + val_images);
  // A training image costs a forward and a backward pass (2x the forward), a validation image a
  // forward.
  f.achieved_flop_per_s =
      f.time_s > 0 ? (3.0 * train_images + val_images) * forward_flops_per_image / f.time_s : 0.0;
  if (energy_wh && *energy_wh > 0) {
    f.images_per_wh = static_cast<double>(f.images) / *energy_wh;
    f.j_per_image = *energy_wh * 3600.0 / static_cast<double>(f.images);
  }
  return f;
}

}  // namespace scaffold::imgcls
