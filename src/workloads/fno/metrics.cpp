#include "workloads/fno/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/pyfloat.hpp"
#include "report/step_csv.hpp"

namespace scaffold::fno {

namespace {

// The columns of epoch_stats.csv, in order.
const std::vector<std::string>& epoch_stats_columns() {
  static const std::vector<std::string> columns{
      "epoch",        "warmup",        "train_rel_l2", "val_rel_l2",   "val_mse",
      "lr",           "duration_s",    "train_s",      "validation_s", "monitor_s",
      "checkpoint_s", "train_samples", "val_samples",  "median_step_s"};
  return columns;
}

}  // namespace

std::string epoch_stats_header() {
  return report::step_csv_header(epoch_stats_columns());
}

std::string epoch_stats_line(const EpochRow& r) {
  auto f = [](double v) { return core::python_float_str(v); };
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}", r.epoch, r.warmup ? 1 : 0,
                     f(r.train_rel_l2), f(r.val_rel_l2), f(r.val_mse), f(r.lr), f(r.duration_s),
                     f(r.train_s), f(r.validation_s), f(r.monitor_s), f(r.checkpoint_s),
                     r.train_samples, r.val_samples, f(r.median_step_s));
}

std::vector<EpochRow> read_epoch_stats(const std::filesystem::path& path) {
  using report::NumberRange;
  std::vector<EpochRow> rows;
  report::read_step_csv(path, epoch_stats_columns(), [&](const report::StepCsvRow& row) {
    EpochRow r;
    r.epoch = row.integer(0, 1);
    r.warmup = row.flag(1);
    // Errors of a diverged epoch may be nan or inf, never negative.
    r.train_rel_l2 = row.number(2, NumberRange::kNotNegative);
    r.val_rel_l2 = row.number(3, NumberRange::kNotNegative);
    r.val_mse = row.number(4, NumberRange::kNotNegative);
    r.lr = row.number(5, NumberRange::kFinite);
    std::size_t i = 6;
    for (double* v : {&r.duration_s, &r.train_s, &r.validation_s, &r.monitor_s, &r.checkpoint_s})
      *v = row.number(i++, NumberRange::kFinite);
    r.train_samples = row.integer(11, 0);
    r.val_samples = row.integer(12, 0);
    r.median_step_s = row.number(13, NumberRange::kFinite);
    if (!rows.empty() && r.epoch != rows.back().epoch + 1)
      row.fail(fmt::format("epoch {} after epoch {} (epochs must follow each other)", r.epoch,
                           rows.back().epoch));
    rows.push_back(r);
  });
  return rows;
}

double fno_forward_flops(const FnoShape& s) {
  double points = 1.0;
  for (int64_t n : s.grid) points *= static_cast<double>(n);
  double kept = 1.0;
  for (std::size_t i = 0; i < s.modes.size(); ++i)
    kept *= static_cast<double>(i + 1 < s.modes.size() ? 2 * s.modes[i] : s.modes[i]);
  const auto w = static_cast<double>(s.width), p = static_cast<double>(s.projection_channels);
  const double lifted_in = static_cast<double>(s.in_channels) +
                           (s.grid_coordinates ? static_cast<double>(s.grid.size()) : 0.0);
  const double fft = 2.5 * points * std::log2(points);  // one real FFT of one channel
  const double layer = 2.0 * w * w * points + 8.0 * w * w * kept + 2.0 * w * fft;
  // The lifting: in -> width, or in -> P -> ... -> P -> width; the projection width -> P -> ... ->
  // P -> out.
  const auto lift_hidden = static_cast<double>(std::max<int64_t>(s.lifting_layers - 1, 0));
  const auto proj_hidden = static_cast<double>(std::max<int64_t>(s.projection_layers - 2, 0));
  const double lift = s.lifting_layers > 1
                          ? 2.0 * lifted_in * p + (lift_hidden - 1.0) * 2.0 * p * p + 2.0 * p * w
                          : 2.0 * lifted_in * w;
  return lift * points + static_cast<double>(s.layers) * layer + 2.0 * w * p * points +
         proj_hidden * 2.0 * p * p * points +
         2.0 * p * static_cast<double>(s.out_channels) * points;
}

double scheduled_lr(const LrSchedule& s, int64_t done) {
  if (s.kind == "step") {
    const int64_t decays = done / std::max<int64_t>(s.step_size, 1);  // StepLR: whole steps only
    return s.initial * std::pow(s.gamma, static_cast<double>(decays));
  }
  if (s.kind == "cosine") {
    const double pi = std::acos(-1.0);
    return s.initial *
           (1.0 + std::cos(pi * static_cast<double>(done) /
                           static_cast<double>(std::max<int64_t>(s.t_max, 1)))) /
           2.0;
  }
  throw core::Error(fmt::format("lr_scheduler: '{}' is not one of step, cosine", s.kind));
}

FnoFigures fno_figures(const std::vector<EpochRow>& rows, int64_t timesteps_per_example,
                       double forward_flops_per_example, std::optional<double> energy_wh) {
  FnoFigures f;
  double train_examples = 0.0, val_examples = 0.0, later_train_s = 0.0;
  int64_t later_epochs = 0;
  for (const EpochRow& r : rows) {
    if (r.epoch > 1) {
      later_train_s += r.train_s;
      ++later_epochs;
    }
    if (r.warmup) continue;
    ++f.timed_epochs;
    f.total_epoch_time_s += r.duration_s + r.monitor_s + r.checkpoint_s;
    f.total_train_time_s += r.train_s;
    f.total_compute_time_s += r.train_s + r.validation_s;
    f.total_monitor_time_s += r.monitor_s;
    f.total_checkpoint_time_s += r.checkpoint_s;
    train_examples += static_cast<double>(r.train_samples);
    val_examples += static_cast<double>(r.val_samples);
    f.val_rel_l2 = r.val_rel_l2;
    f.train_rel_l2 = r.train_rel_l2;
  }
  if (f.timed_epochs == 0) throw core::Error("no timed epoch: every epoch was a warm-up epoch");
  const auto epochs = static_cast<double>(f.timed_epochs);
  const auto tpe = static_cast<double>(timesteps_per_example);
  f.train_time_per_epoch_min = f.total_train_time_s / epochs / 60.0;
  f.mean_compile_time_s =
      later_epochs > 0 ? later_train_s / static_cast<double>(later_epochs) : 0.0;
  f.train_timesteps = train_examples * tpe;
  f.timesteps = (train_examples + val_examples) * tpe;
  f.train_timesteps_per_s =
      f.total_train_time_s > 0 ? f.train_timesteps / f.total_train_time_s : 0.0;
  f.timesteps_per_s = f.total_compute_time_s > 0 ? f.timesteps / f.total_compute_time_s : 0.0;
  // A training example costs a forward and a backward (twice the forward), a validation one a
  // forward.
  const double flops = (3.0 * train_examples + val_examples) * forward_flops_per_example;
  f.tflop_per_epoch = flops / epochs / 1e12;
  f.achieved_flop_per_s = f.total_compute_time_s > 0 ? flops / f.total_compute_time_s : 0.0;
  if (energy_wh && *energy_wh > 0) f.timesteps_per_wh = f.timesteps / *energy_wh;
  return f;
}

}  // namespace scaffold::fno
