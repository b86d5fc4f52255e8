#include "workloads/fno/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/numbers.hpp"
#include "core/pyfloat.hpp"
#include "report/step_csv.hpp"

namespace scaffold::fno {

const report::StepCsvColumns<EpochRow>& epoch_stats_columns() {
  using report::NumberRange;
  using R = EpochRow;
  // Errors of a diverged epoch may be nan or inf, never negative.
  static const report::StepCsvColumns<EpochRow> columns(
      {report::integer_column("epoch", &R::epoch, 1), report::flag_column("warmup", &R::warmup),
       report::number_column("train_rel_l2", &R::train_rel_l2, NumberRange::kNotNegative),
       report::number_column("val_rel_l2", &R::val_rel_l2, NumberRange::kNotNegative),
       report::number_column("val_mse", &R::val_mse, NumberRange::kNotNegative),
       report::number_column("lr", &R::lr, NumberRange::kFinite),
       report::number_column("duration_s", &R::duration_s, NumberRange::kFinite),
       report::number_column("train_s", &R::train_s, NumberRange::kFinite),
       report::number_column("validation_s", &R::validation_s, NumberRange::kFinite),
       report::number_column("monitor_s", &R::monitor_s, NumberRange::kFinite),
       report::number_column("checkpoint_s", &R::checkpoint_s, NumberRange::kFinite),
       report::integer_column("train_samples", &R::train_samples, 0),
       report::integer_column("val_samples", &R::val_samples, 0),
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
    return s.initial *
           (1.0 + std::cos(core::kPi * static_cast<double>(done) /
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
