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

using report::NumberRange;

const report::StepCsvColumns<EpochRow>& epoch_stats_columns() {
  using R = EpochRow;
  static const report::StepCsvColumns<EpochRow> columns(
      {report::integer_column("epoch", &R::epoch, 1), report::flag_column("warmup", &R::warmup),
       // a diverged epoch keeps its nan loss
       report::number_column("train_loss", &R::train_loss, NumberRange::kAny),
       report::number_column("train_top1", &R::train_top1, NumberRange::kFraction),
       report::number_column("val_loss", &R::val_loss, NumberRange::kAny),
       report::number_column("val_top1", &R::val_top1, NumberRange::kFraction),
       report::number_column("val_top5", &R::val_top5, NumberRange::kFraction),
       report::number_column("lr", &R::lr, NumberRange::kFinite),
       report::number_column("duration_s", &R::duration_s, NumberRange::kFinite),
       report::number_column("train_s", &R::train_s, NumberRange::kFinite),
       report::number_column("validation_s", &R::validation_s, NumberRange::kFinite),
       report::integer_column("train_images", &R::train_images, 0),
       report::integer_column("val_images", &R::val_images, 0),
       report::number_column("median_step_s", &R::median_step_s, NumberRange::kFinite)},
      report::epochs_follow(&R::epoch));
  return columns;
}

std::string epoch_stats_header() {
  return epoch_stats_columns().header();
}

std::string epoch_stats_line(const EpochRow& r) {
  return epoch_stats_columns().line(r);
}

std::vector<EpochRow> read_epoch_stats(const std::filesystem::path& path) {
  return epoch_stats_columns().read(path);
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
