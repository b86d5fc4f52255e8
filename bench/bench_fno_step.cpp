// One FNO training step (forward, the relative L2 loss, backward, Adam) timed in isolation on
// fixed fields: CARAML's operator workload without its data pipeline. bench/fno_step.py is the
// PyTorch eager twin (the same model written out in Python) and bench/bench_fno_step.sh
// alternates the two. Both sides set every parameter, the input and the target from the same
// closed-form pattern, so their first losses must agree (the driver checks). No data, no MPI.
// Legend: B batch, C channels, grid = (N_0, ..., N_{d-1}).
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/probe_verdicts.hpp"
#include "train/grad_clip.hpp"
#include "workloads/fno/fno.hpp"

using namespace scaffold;

namespace {

struct BenchOptions {
  std::vector<int64_t> grid{128, 32};
  int64_t channels = 4;  // in and out (rbc2d: u_x, u_z, b, p)
  int64_t modes = 12, width = 32, layers = 4, projection = 128, batch = 4;
  int threads = 0;
  int timed_steps = 5, warmup_steps = 2;
  std::string mixing = "real";              // FnoOptions::real_mode_mixing
  std::string projection_kernel = "fused";  // FnoOptions::fused_projection
  std::string pointwise_kernel = "fused";   // FnoOptions::fused_pointwise
  std::string transform = "probe";          // FnoOptions::spectral_transform (auto on a CPU)
  std::string trace;  // non-empty: LibTorch's per-op trace of one more step, Chrome JSON
};

// The closed-form pattern both sides fill tensors with: 0.05 sin(0.37 i + k) over the flat
// index i, computed in float64, cast to float32.
at::Tensor pattern(at::IntArrayRef shape, double k) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (at::sin(at::arange(n, at::kDouble) * 0.37 + k) * 0.05).to(at::kFloat).reshape(shape);
}

int64_t peak_rss_mib() {
  return core::peak_rss_bytes() / (1 << 20);
}

int run(const BenchOptions& o) {
  const int threads = o.threads > 0 ? o.threads : core::default_thread_count();
  at::set_num_threads(threads);
  fno::FnoOptions mo;
  mo.in_channels = o.channels;
  mo.out_channels = o.channels;
  mo.modes.assign(o.grid.size(), o.modes);
  mo.width = o.width;
  mo.layers = o.layers;
  mo.projection_channels = o.projection;
  mo.real_mode_mixing = o.mixing == "real";
  mo.fused_projection = o.projection_kernel == "fused";
  mo.fused_pointwise = o.pointwise_kernel == "fused";
  using Transform = fno::SpectralConvOptions::Transform;
  mo.spectral_transform = o.transform == "fft"   ? Transform::Fft
                          : o.transform == "dft" ? Transform::Dft
                                                 : Transform::Probe;
  fno::Fno net(mo);
  {
    torch::NoGradGuard no_grad;
    auto named = net->named_parameters();
    std::vector<std::string> names;
    for (const auto& p : named) names.push_back(p.key());
    std::sort(names.begin(), names.end());
    for (std::size_t i = 0; i < names.size(); ++i) {
      at::Tensor p = named[names[i]];
      p.copy_(pattern(p.sizes(), static_cast<double>(i)));
    }
  }
  std::vector<int64_t> shape{o.batch, o.channels};
  shape.insert(shape.end(), o.grid.begin(), o.grid.end());
  const at::Tensor x = pattern(shape, 0.5) * 20.0;  // (B, C, *grid)
  const at::Tensor y = pattern(shape, 1.5) * 20.0;
  kernels::FusedAdam adam(net->parameters(), torch::optim::AdamOptions(1e-3).weight_decay(1e-4));
  const int64_t params = fno::count_parameters(*net);

  double loss0 = 0.0;
  auto step = [&] {
    const at::Tensor pred = net->forward(x);
    const at::Tensor loss = ((pred - y).flatten(1).norm(2, {1}) / y.flatten(1).norm(2, {1})).mean();
    train::clear_gradients(adam);
    loss.backward();
    adam.step();
    return loss.item<double>();
  };
  for (int i = 0; i < o.warmup_steps; ++i) {
    const double l = step();
    if (i == 0) loss0 = l;
  }
  std::vector<double> times;
  for (int i = 0; i < o.timed_steps; ++i) {
    core::Stopwatch clock;
    const double l = step();
    times.push_back(clock.elapsed_s());
    if (o.warmup_steps == 0 && i == 0) loss0 = l;
  }
  if (!o.trace.empty()) {  // after the timed steps, so the profiler costs them nothing
    torch::autograd::profiler::RecordProfile record(o.trace);
    step();
  }
  const double ms = core::median(times) * 1e3;
  std::string grid;
  for (std::size_t i = 0; i < o.grid.size(); ++i)
    grid += (i ? "x" : "") + std::to_string(o.grid[i]);
  fmt::print(
      "result impl=cpp grid={} channels={} modes={} width={} layers={} batch={} threads={} "
      "params={} "
      "loss0={:.8f} step_ms={:.3f} timesteps_per_s={:.2f} peak_rss_mib={} transform={} "
      "pointwise={}\n",
      grid, o.channels, o.modes, o.width, o.layers, o.batch, threads, params, loss0, ms,
      static_cast<double>(o.batch) / (ms / 1e3), peak_rss_mib(), o.transform, o.pointwise_kernel);
  for (const std::string& line : kernels::probe_verdicts().lines())
    fmt::print("  probe: {}\n", line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app("one FNO training step (forward, relative L2, backward, Adam), timed");
  app.add_option("--grid", o.grid, "grid points per dimension (1 to 3 entries)")->expected(1, 3);
  app.add_option("--channels", o.channels, "input = output channels");
  app.add_option("--modes", o.modes, "kept modes per dimension");
  app.add_option("--width", o.width, "channels of the Fourier layers");
  app.add_option("--layers", o.layers, "Fourier layers");
  app.add_option("--projection", o.projection, "projection channels");
  app.add_option("--batch", o.batch, "examples per step");
  app.add_option("--threads", o.threads, "intra-op threads (0: all)");
  app.add_option("--steps", o.timed_steps, "timed steps");
  app.add_option("--warmup", o.warmup_steps, "untimed steps first");
  app.add_option(
         "--mixing", o.mixing,
         "the spectral mode mixing: real (batched real GEMMs) or complex (LibTorch's complex bmm)")
      ->check(CLI::IsMember({"real", "complex"}));
  app.add_option("--pointwise-kernel", o.pointwise_kernel,
                 "the Fourier layers' pointwise branch + sum + GELU: fused (one function) or "
                 "libtorch (a product, an add and a GELU)")
      ->check(CLI::IsMember({"fused", "libtorch"}));
  app.add_option("--projection-kernel", o.projection_kernel,
                 "the projection: fused (tiled, one pass) or libtorch (two maps and a GELU)")
      ->check(CLI::IsMember({"fused", "libtorch"}));
  app.add_option("--transform", o.transform,
                 "the Fourier layers' transforms: probe (the DFT products where measured faster, "
                 "scaffold fno's default on a CPU), dft (always) or fft (LibTorch's FFTs)")
      ->check(CLI::IsMember({"probe", "dft", "fft"}));
  app.add_option("--trace", o.trace,
                 "write LibTorch's per-operator trace of one step after the timed ones to this "
                 "Chrome JSON file");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
