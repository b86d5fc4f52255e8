// One U-Net training step (forward, loss, backward, clip, Adam) timed in isolation, exactly as
// the benchmark's segmentation task runs a training step, on random input and labels; plus a large
// GEMM measured in the same process (fp32, or bf16 with --bf16 on CUDA), so the step's model FLOP/s
// has a ceiling to be compared with (on a GPU: the MFU against a measured bf16 matrix multiply). On
// the CPU or, with
// --device cuda, on a GPU (cuDNN autotuning on, as scaffold benchmark; each timed step ends in a
// device synchronisation, here only). One scale per process, so VmHWM is that scale's peak.
// bench/train_step.py is the PyTorch twin; the drivers bench/bench_train_step.sh (CPU) and
// scripts/gpu-check (GPU) run the two. No data loading, no validation, no MPI.
// Legend: N batch, C channels, D/H/W spatial sizes.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "core/version.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "profile/profiler.hpp"
#include "profile/torch_ops.hpp"
#include "train/grad_clip.hpp"
#include "workloads/scaffold/loss.hpp"
#include "workloads/scaffold/model/unet.hpp"

using namespace scaffold;

namespace {

struct BenchOptions {
  int scale = 5;           // volume side 2^scale
  int bottleneck_dim = 3;  // U-Net layers = scale - bottleneck_dim (ScaFFold's unet_bottleneck_dim)
  int base_channels = 16;
  int batch = 2;  // batch 1 takes LibTorch 1.13's slow conv path (docs/performance.md)
  int warmup_steps = 2;
  int timed_steps = 5;
  int threads = 0;                 // 0: core::default_thread_count()
  bool bf16 = false;               // bf16 autocast in the forward pass
  bool channels_last = false;      // 5-D parameters and the input in ChannelsLast3d
  std::string kernels = "native";  // CPU kernels: native (issue 17) or libtorch
  int gemm_n = 4096;               // square GEMM side (even); 0 skips it
  int gemm_reps = 3;
  uint64_t seed = 0;
  std::string device = "cpu";  // cpu | cuda
  std::string trace;           // Chrome trace of the timed steps with LibTorch's operators
};

// Wall time of each part of one step.
struct StepPhases {
  double forward_s = 0;    // model forward (under autocast when asked for)
  double loss_s = 0;       // segmentation_loss
  double backward_s = 0;   // zero_grad + backward
  double optimizer_s = 0;  // clip + Adam step + loss.item()
};

// A "VmXXX:" field of /proc/self/status in bytes (0 when absent). core::peak_rss_bytes gives VmHWM
// only; the step's delta also needs the resident size before it.
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return 0;
}

constexpr double kMiB = 1024.0 * 1024.0;

// The trainer's forward autocast state: bf16 on the training device when asked for, else off.
nn::AutocastState forward_autocast(bool bf16, const c10::Device& device) {
  nn::AutocastState s = nn::AutocastState::current().disabled();
  if (device.is_cuda()) {
    s.cuda_enabled = bf16;
    s.cuda_dtype = at::kBFloat16;
  } else {
    s.cpu_enabled = bf16;
    s.cpu_dtype = at::kBFloat16;
  }
  return s;
}

// Waits for the device (CUDA kernels are asynchronous): ends each timed region here. The bench
// times steps one by one; the training loop itself never does this (it reads events per epoch).
void wait_for(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Median GFLOP/s (2n^3 FLOPs per call) of `call` after one untimed call; `wait` ends each call.
template <typename Call, typename Wait>
double gemm_rate_gflop_per_s(int64_t n, int reps, Call&& call, Wait&& wait) {
  call();
  wait();
  std::vector<double> t_s;
  for (int r = 0; r < reps; ++r) {
    core::Stopwatch clock;
    call();
    wait();
    t_s.push_back(clock.elapsed_s());
  }
  return 2.0 * static_cast<double>(n) * n * n / core::median(t_s) / 1e9;
}

// An n x n x n fp32 GEMM two ways. at::mm goes to the BLAS behind libblas.so.3 (OpenBLAS here);
// a 1^3 Conv3d of batch 2 is the same GEMM run by oneDNN, the library the U-Net's convolutions
// use (1.13 picks oneDNN for any f32 conv with N > 1). Both are reported; the faster is the
// ceiling.
struct GemmRates {
  double blas_gflop_per_s = 0;
  double onednn_gflop_per_s = 0;
};

GemmRates measure_gemm(int64_t n, int reps) {
  torch::NoGradGuard no_grad;
  GemmRates r;
  const at::Tensor a = at::randn({n, n});
  const at::Tensor b = at::randn({n, n});
  at::Tensor c = at::empty({n, n});
  r.blas_gflop_per_s = gemm_rate_gflop_per_s(
      n, reps, [&] { at::mm_out(c, a, b); }, [] {});
  const at::Tensor x = at::randn({2, n, 1, 1, n / 2});  // (N, Cin, D, H, W): 2 * n/2 = n voxels
  const at::Tensor w = at::randn({n, n, 1, 1, 1});      // (Cout, Cin, 1, 1, 1)
  r.onednn_gflop_per_s = gemm_rate_gflop_per_s(
      n, reps, [&] { at::conv3d(x, w); }, [] {});
  return r;
}

// On a GPU: an n x n x n GEMM in `dtype` through cuBLAS (at::mm), the ceiling of the step's
// convolutions in that precision; MFU = the step's model FLOP/s over this rate, both measured in
// the same process on the same GPU.
double measure_device_gemm(int64_t n, int reps, at::ScalarType dtype, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({n, n}, options);
  const at::Tensor b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  return gemm_rate_gflop_per_s(
             n, reps,
             [&] {
               for (int i = 0; i < 10; ++i)
                 at::mm_out(c, a, b);  // 10 per timed call: well above launch latency
             },
             [&] { wait_for(device); }) *
         10.0;
}

int run(const BenchOptions& o) {
  const int threads = o.threads > 0 ? o.threads : core::default_thread_count();
  at::set_num_threads(threads);
  const int64_t side = int64_t{1} << o.scale;
  const c10::Device device =
      o.device == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    fmt::print(stderr,
               "error: --device cuda, but this LibTorch has no CUDA or no GPU is visible\n");
    return 2;
  }
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);  // as scaffold benchmark

  model::UNetOptions mo;
  mo.in_channels = 3;
  mo.n_classes = 6;
  mo.layers = o.scale - o.bottleneck_dim;
  mo.base_channels = o.base_channels;
  mo.group_norm_groups = 8;
  // As scaffold benchmark does: 1.13's CPU bf16 max_pool3d / conv_transpose3d are missing or wrong.
  mo.fp32_pool_and_upsample = o.bf16 && !model::bf16_pool_and_upsample_work(device);
  // The CPU kernels of issue 17: native = what scaffold benchmark's `auto` keys pick for this
  // device, layout and precision; libtorch = none; or a comma list of probe, winograd, conv
  // (oneDNN), upconv, norm, pool, head, loss to measure each alone.
  bool fused_loss = false;
  if (o.kernels == "native") {
    model::KernelTarget target;
    target.cpu = device.is_cpu();
    target.device = device.str();
    target.channels_last = o.channels_last;
    target.bf16_autocast = o.bf16;
    target.bf16_products = kernels::cpu_has_bf16_products();
    target.onednn_built = kernels::dnnl_conv3d_built();
    mo.kernels = model::resolve_kernel_choice({}, target);
    fused_loss = mo.kernels.loss == model::LossKernel::Fused;
  } else {
    const auto uses = [&](const char* k) {
      return ("," + o.kernels + ",").find(std::string(",") + k + ",") != std::string::npos;
    };
    // probe: Winograd where it measures faster, winograd: on every layer it takes; oneDNN (where
    // built) for the other layers.
    mo.kernels.conv = uses("probe")                                  ? model::ConvKernel::Probe
                      : uses("winograd")                             ? model::ConvKernel::Winograd
                      : uses("conv") && kernels::dnnl_conv3d_built() ? model::ConvKernel::OneDnn
                                                                     : model::ConvKernel::LibTorch;
    mo.kernels.upconv = uses("upconv") ? model::UpconvKernel::Gemm : model::UpconvKernel::LibTorch;
    mo.kernels.pool = uses("pool") ? model::PoolKernel::Native : model::PoolKernel::LibTorch;
    mo.kernels.head = uses("head") ? model::HeadKernel::Gemm : model::HeadKernel::LibTorch;
    mo.kernels.norm =
        uses("norm") && !o.channels_last ? model::NormKernel::Fused : model::NormKernel::Unfused;
    fused_loss = uses("loss") && device.is_cpu();
  }

  // Model, then input, then labels from one seed: train_step.py draws them in the same order from
  // the same generator, so both start from the same weights and data (checked through loss0).
  torch::manual_seed(o.seed);
  model::UNet3d net(mo);
  net->train();
  at::Tensor image = at::randn({o.batch, mo.in_channels, side, side, side});  // (N, 3, D, H, W)
  const at::Tensor labels =
      at::randint(0, mo.n_classes, {o.batch, side, side, side});  // (N, D, H, W)
  if (o.channels_last) {
    torch::NoGradGuard no_grad;
    for (at::Tensor& p : net->parameters())
      if (p.dim() == 5) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast3d));
    image = image.contiguous(at::MemoryFormat::ChannelsLast3d);
  }
  const at::Tensor class_weights =
      train::ce_class_weights(train::class_counts(labels, mo.n_classes)).to(device);
  // Drawn on the CPU (the Python twin draws the same numbers), then moved: strides are kept.
  net->to(device);
  image = image.to(device);
  const at::Tensor device_labels = labels.to(device);
  kernels::FusedAdam optimizer(net->parameters(), torch::optim::AdamOptions(1e-3));
  const nn::AutocastState amp_state = forward_autocast(o.bf16, device);
  const int64_t params = nn::count_parameters(*net);

  // the segmentation task's training step, step for step; loss.item() ends the step as the
  // trainer's host-side epoch sums eventually do. CPU ops are synchronous, so the phase clocks are
  // exact; on a GPU each phase ends with a device wait (so the phases add up to a slightly longer
  // step).
  std::vector<StepPhases> phases;
  double loss0 = 0.0;  // loss of the first step, before any update
  auto step = [&]() {
    StepPhases ph;
    core::Stopwatch clock;
    at::Tensor logits;
    {
      nn::AutocastGuard amp(amp_state);
      logits = net->forward(image);
    }
    wait_for(device);
    ph.forward_s = clock.elapsed_s();
    const train::LossTerms terms =
        train::segmentation_loss(logits, device_labels, class_weights, {}, fused_loss);
    wait_for(device);
    ph.loss_s = clock.elapsed_s() - ph.forward_s;
    train::clear_gradients(optimizer);
    terms.loss.backward();
    wait_for(device);
    ph.backward_s = clock.elapsed_s() - ph.forward_s - ph.loss_s;
    train::clip_grad_norm(net->parameters(), 1.0, &optimizer);
    optimizer.step();
    at::autocast::clear_cache();
    const double loss = terms.loss.item<double>();
    ph.optimizer_s = clock.elapsed_s() - ph.forward_s - ph.loss_s - ph.backward_s;
    if (phases.empty()) loss0 = loss;
    phases.push_back(ph);
  };

  // --trace: the profiler records the timed steps only (its schedule: the warm-up steps wait).
  profile::ProfileOptions trace_options;
  // (LibTorch's profiler is prepared in the profiler's warm-up step: the last untimed one.)
  const int64_t trace_warmup = o.warmup_steps > 0 ? 1 : 0;
  trace_options.schedule = {o.warmup_steps - trace_warmup, trace_warmup, o.timed_steps};
  trace_options.record_shapes = true;
  profile::Profiler profiler(!o.trace.empty(), trace_options.schedule);
  profile::record_torch_operators(profiler, trace_options);

  const int64_t rss_before_bytes = proc_status_bytes("VmRSS");
  for (int i = 0; i < o.warmup_steps; ++i) {
    profiler.step();
    step();
  }
  std::vector<double> step_s;
  for (int i = 0; i < o.timed_steps; ++i) {
    profiler.step();
    core::Stopwatch clock;
    step();
    step_s.push_back(clock.elapsed_s());
  }
  const int64_t hwm_bytes = proc_status_bytes("VmHWM");  // before the GEMM's 3 n^2 floats
  if (profiler.write_chrome_trace(o.trace))
    fmt::print("  trace of the {} timed steps (LibTorch's operators, with shapes): {}\n",
               o.timed_steps, o.trace);
  phases.erase(phases.begin(), phases.begin() + o.warmup_steps);
  auto phase_ms = [&](double StepPhases::*field) {
    std::vector<double> v;
    v.reserve(phases.size());
    for (const StepPhases& ph : phases) v.push_back(ph.*field * 1e3);
    return core::median(v);
  };
  const double forward_ms = phase_ms(&StepPhases::forward_s);
  const double loss_ms = phase_ms(&StepPhases::loss_s);
  const double backward_ms = phase_ms(&StepPhases::backward_s);
  const double optimizer_ms = phase_ms(&StepPhases::optimizer_s);
  GemmRates gemm;
  if (o.gemm_n > 0 && device.is_cuda())
    gemm.blas_gflop_per_s =
        measure_device_gemm(o.gemm_n, o.gemm_reps, o.bf16 ? at::kBFloat16 : at::kFloat, device);
  else if (o.gemm_n > 0)
    gemm = measure_gemm(o.gemm_n, o.gemm_reps);
  const char* gemm_dtype = device.is_cuda() && o.bf16 ? "bf16" : "fp32";
  const double gemm_best = std::max(gemm.blas_gflop_per_s, gemm.onednn_gflop_per_s);

  const core::Spread step_spread = core::spread(step_s);
  const double step_ms = step_spread.median * 1e3;
  const double flop_step = 3.0 * model::unet_forward_flops(mo, side) * o.batch;  // fwd + 2x bwd
  const double model_rate = flop_step / (step_ms * 1e-3) / 1e9;
  fmt::print(
      "bench_train_step (C++ LibTorch {}, scaffold {} {}): scale {} ({}^3), {} layers, base {}, "
      "batch {}, {}, {}, {} GroupNorm + ReLU, {} loss, on {}, {} threads, {} parameters\n",
      core::torch_version_built_with(), core::version(), core::git_commit(), o.scale, side,
      mo.layers, o.base_channels, o.batch, o.bf16 ? "bf16 autocast" : "fp32",
      o.channels_last ? "ChannelsLast3d" : "NCDHW", model::to_string(mo.kernels.norm),
      fused_loss ? "fused" : "LibTorch's", device.str(), threads, params);
  fmt::print(
      "  step: median {:.1f} ms (min {:.1f}, max {:.1f}) of {} after {} warm-up; {:.2f} GFLOP "
      "-> {:.1f} GFLOP/s\n",
      step_ms, step_spread.min * 1e3, step_spread.max * 1e3, o.timed_steps, o.warmup_steps,
      flop_step / 1e9, model_rate);
  if (o.gemm_n > 0 && device.is_cuda()) {
    fmt::print(
        "  GEMM {}^3 {} on {}: at::mm (cuBLAS) {:.1f} GFLOP/s; the step reaches {:.3f} of it (MFU "
        "against "
        "the measured matrix multiply)\n",
        o.gemm_n, gemm_dtype, device.str(), gemm.blas_gflop_per_s, model_rate / gemm_best);
  } else if (o.gemm_n > 0) {
    fmt::print(
        "  GEMM {}^3 fp32: at::mm (BLAS) {:.1f} GFLOP/s, oneDNN (1^3 conv) {:.1f} GFLOP/s; the "
        "step "
        "reaches {:.2f} of the faster\n",
        o.gemm_n, gemm.blas_gflop_per_s, gemm.onednn_gflop_per_s, model_rate / gemm_best);
  }
  fmt::print(
      "  phases (medians): forward {:.1f} ms, loss {:.1f} ms, zero_grad + backward {:.1f} ms, "
      "clip + Adam {:.1f} ms\n",
      forward_ms, loss_ms, backward_ms, optimizer_ms);
  fmt::print(
      "  memory: VmRSS before the first step {:.0f} MiB, VmHWM after the steps {:.0f} MiB "
      "(+{:.0f} MiB); first-step loss {:.6f}\n",
      rss_before_bytes / kMiB, hwm_bytes / kMiB, (hwm_bytes - rss_before_bytes) / kMiB, loss0);
  for (const std::string& line : kernels::probe_verdicts().lines())
    fmt::print("  probe: {}\n", line);
  // One machine-readable line; train_step.py prints the same keys (gemm_* excepted).
  fmt::print(
      "result impl=cpp device={} gemm_dtype={} scale={} base={} layers={} batch={} dtype={} "
      "layout={} kernels={} threads={} "
      "params={} step_ms={:.2f} step_ms_min={:.2f} step_ms_max={:.2f} step_gflop={:.3f} "
      "model_gflop_per_s={:.2f} gemm_n={} gemm_blas_gflop_per_s={:.2f} "
      "gemm_onednn_gflop_per_s={:.2f} rss_before_mib={:.1f} "
      "peak_rss_mib={:.1f} peak_rss_delta_mib={:.1f} loss0={:.6f} forward_ms={:.2f} loss_ms={:.2f} "
      "backward_ms={:.2f} optimizer_ms={:.2f}\n",
      device.is_cuda() ? "cuda" : "cpu", gemm_dtype, o.scale, o.base_channels, mo.layers, o.batch,
      o.bf16 ? "bf16" : "fp32", o.channels_last ? "cl3d" : "ncdhw", o.kernels, threads, params,
      step_ms, step_spread.min * 1e3, step_spread.max * 1e3, flop_step / 1e9, model_rate, o.gemm_n,
      gemm.blas_gflop_per_s, gemm.onednn_gflop_per_s, rss_before_bytes / kMiB, hwm_bytes / kMiB,
      (hwm_bytes - rss_before_bytes) / kMiB, loss0, forward_ms, loss_ms, backward_ms, optimizer_ms);
  return 0;
}

// Parses and checks the flags, then runs. Usage errors exit 2 (CLI11's own codes for its checks).
int parse_and_run(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{
      "Time one U-Net training step (forward, loss, backward, clip, Adam) and a fp32 GEMM"};
  app.add_option("--scale", o.scale, "volume side 2^scale")->check(CLI::Range(4, 10));
  app.add_option("--bottleneck-dim", o.bottleneck_dim, "U-Net layers = scale - this")
      ->check(CLI::Range(0, 9));
  app.add_option("--base", o.base_channels, "channels of the first U-Net level (multiple of 8)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "local batch size")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup_steps, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", o.timed_steps, "timed steps (the median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "intra-op threads (0: OMP_NUM_THREADS or all CPUs)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--bf16", o.bf16, "bf16 autocast in the forward pass");
  app.add_flag("--channels-last", o.channels_last, "parameters and input in ChannelsLast3d");
  app.add_option("--kernels", o.kernels,
                 "CPU kernels: native (what the auto keys pick), libtorch, or a comma list of "
                 "probe, winograd, conv (oneDNN), upconv, norm, pool, head, loss");
  app.add_option("--gemm-n", o.gemm_n, "side of the fp32 GEMM (0: skip)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gemm-reps", o.gemm_reps, "timed GEMMs (median)")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the weights, input and labels");
  app.add_option("--device", o.device,
                 "cpu, or cuda (cuda:0; the GEMM is then cuBLAS in the step's precision)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--trace", o.trace,
                 "write a Chrome trace of the timed steps, LibTorch's operators included, here "
                 "(peak memory then includes the profiler's)");
  CLI11_PARSE(app, argc, argv);
  if (o.gemm_n % 2 != 0) {
    fmt::print(
        stderr,
        "error: --gemm-n must be even (the oneDNN GEMM splits n over a batch of 2), got {}\n",
        o.gemm_n);
    return 2;
  }
  if (o.scale - o.bottleneck_dim < 1) {
    fmt::print(stderr,
               "error: --scale {} - --bottleneck-dim {} leaves no U-Net layer (need >= 1)\n",
               o.scale, o.bottleneck_dim);
    return 2;
  }
  return run(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
