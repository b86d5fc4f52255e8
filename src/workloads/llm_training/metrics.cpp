#include "workloads/llm_training/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/numbers.hpp"
#include "core/pyfloat.hpp"
#include "report/step_csv.hpp"

namespace scaffold::llm {

double megatron_lr(const LrSchedule& s, int64_t samples) {
  const auto n = static_cast<double>(samples);
  const auto warmup = static_cast<double>(s.warmup_samples);
  if (s.warmup_samples > 0 && samples <= s.warmup_samples) return s.lr * n / warmup;
  if (s.style == "constant") return s.lr;
  if (samples > s.decay_samples) return s.min_lr;
  const double ratio = (n - warmup) / (static_cast<double>(s.decay_samples) - warmup);
  const double coeff =
      s.style == "linear" ? 1.0 - ratio : 0.5 * (std::cos(core::kPi * ratio) + 1.0);
  return s.min_lr + coeff * (s.lr - s.min_lr);
}

int caraml_activation_factor(const std::string& recompute_granularity) {
  return recompute_granularity == "selective" || recompute_granularity == "full" ? 4 : 3;
}

double gpt_iteration_flops(const GptFlopsModel& m) {
  const auto b = static_cast<double>(m.global_batch), s = static_cast<double>(m.seq_length);
  const auto l = static_cast<double>(m.num_layers), h = static_cast<double>(m.hidden_size);
  const auto v = static_cast<double>(m.padded_vocab);
  return 24.0 * m.activation_factor * b * s * l * h * h *
         (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

double tflops_per_device(const GptFlopsModel& m, double t, int devices) {
  return t > 0 && devices > 0 ? gpt_iteration_flops(m) / (t * devices * 1e12) : 0.0;
}

double tokens_per_s(int64_t global_batch, int64_t seq_length, double t) {
  return t > 0 ? static_cast<double>(global_batch) * static_cast<double>(seq_length) / t : 0.0;
}

const report::StepCsvColumns<IntervalRow>& iteration_stats_columns() {
  using report::NumberRange;
  using R = IntervalRow;
  // Derived from train_s / iterations (read before it) and written back exactly: a different
  // value was edited.
  report::StepCsvColumn<IntervalRow> time_per_iteration{
      "time_per_iteration_s",
      [](const R& r) { return core::python_float_str(r.time_per_iteration_s()); },
      [](const report::StepCsvRow& cells, std::size_t i, R& r) {
        const double per_iteration = cells.number(i, NumberRange::kFinite);
        const double expected = r.time_per_iteration_s();
        if (std::abs(per_iteration - expected) > 1e-9 * std::max(1.0, expected))
          cells.fail(fmt::format("time_per_iteration_s {} is not train_s / iterations = {}",
                                 core::python_float_str(per_iteration),
                                 core::python_float_str(expected)));
      }};
  static const report::StepCsvColumns<IntervalRow> columns(
      {report::integer_column("iteration", &R::iteration, 1),
       report::integer_column("iterations", &R::iterations, 1),
       report::flag_column("warmup", &R::warmup),
       report::number_column("train_s", &R::train_s, NumberRange::kFinite), time_per_iteration,
       report::number_column("lm_loss", &R::lm_loss, NumberRange::kAny),    // diverged: nan
       report::number_column("val_loss", &R::val_loss, NumberRange::kAny),  // nan: none after it
       report::number_column("lr", &R::lr, NumberRange::kFinite),
       // inf or nan when fp16 overflowed
       report::number_column("grad_norm", &R::grad_norm, NumberRange::kNotNegative),
       report::number_column("loss_scale", &R::loss_scale, NumberRange::kPositive),
       report::integer_column("skipped", &R::skipped, 0)},
      [](const report::StepCsvRow& cells, const R& r, const std::vector<R>& before) {
        if (r.skipped > r.iterations)
          cells.fail(fmt::format("skipped {} is more than the interval's {} iterations", r.skipped,
                                 r.iterations));
        const int64_t previous = before.empty() ? 0 : before.back().iteration;
        if (before.empty() ? r.iteration < r.iterations : r.iteration != previous + r.iterations)
          cells.fail(before.empty()
                         ? fmt::format("iteration {} ends an interval of {} iterations, which "
                                       "cannot start before iteration 1",
                                       r.iteration, r.iterations)
                         : fmt::format("iteration {} does not follow iteration {} by {}",
                                       r.iteration, previous, r.iterations));
      });
  return columns;
}

std::string iteration_stats_header() {
  return iteration_stats_columns().header();
}

std::string iteration_stats_line(const IntervalRow& r) {
  return iteration_stats_columns().line(r);
}

std::vector<IntervalRow> read_iteration_stats(const std::filesystem::path& path) {
  return iteration_stats_columns().read(path);
}

std::string megatron_log_line(const IntervalRow& r, int64_t train_iters, const GptFlopsModel& m,
                              int devices) {
  const double t = r.time_per_iteration_s();
  return fmt::format(
      " iteration {:8d}/{:8d} | consumed samples: {:12d} | elapsed time per iteration (s): {:.4f} "
      "| learning rate: "
      "{:.3E} | global batch size: {:5d} | lm loss: {:.6E} | loss scale: {:.1f} | grad norm: "
      "{:.3f} | number of "
      "skipped iterations: {:3d} | samples per second: {:.3f} | tokens per second: {:.1f} | "
      "TFLOPs: {:.2f} |",
      r.iteration, train_iters, r.iteration * m.global_batch, t, r.lr, m.global_batch, r.lm_loss,
      r.loss_scale, r.grad_norm, r.skipped, t > 0 ? static_cast<double>(m.global_batch) / t : 0.0,
      tokens_per_s(m.global_batch, m.seq_length, t), tflops_per_device(m, t, devices));
}

LlmFigures llm_figures(const std::vector<IntervalRow>& rows, const GptFlopsModel& m, int devices,
                       std::optional<double> peak_tflops_per_device,
                       std::optional<double> energy_wh) {
  if (rows.empty()) throw core::Error("no log interval: nothing to compute figures from");
  LlmFigures f;
  double sum_t = 0.0, sum_tflops = 0.0;
  for (const IntervalRow& r : rows) {
    sum_t += r.time_per_iteration_s();
    sum_tflops += tflops_per_device(m, r.time_per_iteration_s(), devices);
    if (!r.warmup) {
      f.timed_iterations += r.iterations;
      f.timed_s += r.train_s;
    }
    if (std::isfinite(r.val_loss)) f.val_loss = r.val_loss;
  }
  const auto n = static_cast<double>(rows.size());
  f.iterations = rows.back().iteration;
  f.lm_loss = rows.back().lm_loss;
  f.caraml_time_per_iteration_s = sum_t / n;
  f.caraml_tokens_per_s = tokens_per_s(m.global_batch, m.seq_length, f.caraml_time_per_iteration_s);
  f.caraml_tflops_per_device = sum_tflops / n;
  if (f.timed_iterations > 0) {
    f.time_per_iteration_s = f.timed_s / static_cast<double>(f.timed_iterations);
    f.tokens_per_s = tokens_per_s(m.global_batch, m.seq_length, f.time_per_iteration_s);
    f.tflops_per_device = tflops_per_device(m, f.time_per_iteration_s, devices);
    GptFlopsModel model_only = m;
    model_only.activation_factor = 3;
    f.model_tflops_per_device = tflops_per_device(model_only, f.time_per_iteration_s, devices);
    if (peak_tflops_per_device && *peak_tflops_per_device > 0)
      f.mfu = f.model_tflops_per_device / *peak_tflops_per_device;
    const double tokens = static_cast<double>(f.timed_iterations * m.global_batch * m.seq_length);
    if (energy_wh && *energy_wh > 0) {
      f.tokens_per_wh = tokens / *energy_wh;
      f.j_per_token = *energy_wh * 3600.0 / tokens;
    }
  }
  return f;
}

std::optional<double> table_peak_tflops(const std::string& device_name,
                                        const std::string& precision) {
  if (precision != "bf16" && precision != "fp16") return std::nullopt;
  std::string name;
  for (char c : device_name) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // Most specific first: "H100 PCIe" before "H100", "GH200" before "H200".
  struct Entry {
    const char* key;
    double tflops;
  };
  // MI250: per GCD (what one rank drives); V100: fp16 tensor cores (no bf16).
  static const Entry kTable[] = {
      {"GH200", 989.0},  {"H200", 989.0},   {"H100 PCIE", 756.0}, {"H100", 989.0},
      {"A100", 312.0},   {"GB200", 2500.0}, {"B200", 2250.0},     {"MI300X", 1307.0},
      {"MI300A", 980.0}, {"MI250", 181.0},  {"L40S", 362.0},      {"V100", 125.0},
  };
  for (const Entry& e : kTable)
    if (name.find(e.key) != std::string::npos) return e.tflops;
  return std::nullopt;
}

}  // namespace scaffold::llm
