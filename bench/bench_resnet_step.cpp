// One ResNet training step (forward, mean cross-entropy, backward, SGD with momentum and weight
// decay) timed in isolation on random images and labels: CARAML's image-classification workload
// without its data pipeline. bench/resnet_step.py is the PyTorch eager + torchvision twin and
// bench/bench_resnet_step.sh alternates the two. One configuration per process, so VmHWM is that
// configuration's peak. No data loading, no augmentation, no validation, no MPI.
// Legend: N batch, C channels, H/W spatial sizes, K classes.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "core/version.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/kernel_use.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "train/grad_clip.hpp"
#include "workloads/image_classification/resnet.hpp"

using namespace scaffold;

namespace {

struct BenchOptions {
  int depth = 18;
  int batch = 8;
  int image_size = 64;  // square images (S, S)
  int64_t classes = 1000;
  int threads = 0;  // 0: core::default_thread_count()
  int timed_steps = 5;
  int warmup_steps = 2;
  int channels_last = 0;                   // 1: parameters, buffers and the input in ChannelsLast
  std::string precision = "fp32";          // "bf16": CPU autocast around the forward
  std::string conv_kernel = "auto";        // the 3x3 stride-1 convs: as the workload's conv_kernel
  std::string norm_kernel = "auto";        // BatchNorm + ReLU: auto | fused | libtorch
  std::string optimizer_kernel = "fused";  // SGD's update: fused | libtorch
  uint64_t seed = 0;
  std::string trace;  // non-empty: LibTorch's per-op trace of one more step, Chrome JSON
};

// Wall time of each part of one step.
struct StepPhases {
  double forward_s = 0;    // model forward (under autocast when asked for)
  double loss_s = 0;       // cross-entropy
  double backward_s = 0;   // zero_grad + backward
  double optimizer_s = 0;  // SGD step + loss.item()
};

// A "VmXXX:" field of /proc/self/status in bytes (0 when absent).
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return 0;
}

constexpr double kMiB = 1024.0 * 1024.0;

// CPU time of the whole machine (all CPUs, not idle or iowait; steal included, since the host
// taking a vCPU away slows us as much as a neighbour does) and of this process (all threads), in
// seconds, plus the wall clock. Two samples give the share of the machine other processes used
// meanwhile: this machine is shared, and a timed step that competed for its two cores is not a
// measurement of the step (OpenMP's spinning barriers make it 2-10x slower, not 10%).
struct CpuSample {
  double machine_busy_s = 0;
  double self_s = 0;
  double wall_s = 0;
};

CpuSample sample_cpu() {
  CpuSample s;
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  s.machine_busy_s =
      (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.self_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  s.wall_s = core::monotonic_s();
  return s;
}

// Share of all CPUs' time between a and b that other processes (or the hypervisor) took, in
// [0, 1]; /proc/stat counts in 10 ms ticks, so a few hundredths are noise.
double other_cpu_share(const CpuSample& a, const CpuSample& b) {
  const double capacity_s =
      (b.wall_s - a.wall_s) * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  const double other_s = (b.machine_busy_s - a.machine_busy_s) - (b.self_s - a.self_s);
  return capacity_s > 0 ? std::clamp(other_s / capacity_s, 0.0, 1.0) : 0.0;
}

int run(const BenchOptions& o) {
  const int threads = o.threads > 0 ? o.threads : core::default_thread_count();
  at::set_num_threads(threads);
  const bool bf16 = o.precision == "bf16";

  imgcls::ResNetOptions mo;
  mo.depth = o.depth;
  mo.num_classes = o.classes;
  // As the workload resolves its conv_kernel key (auto: the probe in fp32, LibTorch's in bf16).
  mo.conv.kernel = imgcls::resolve_conv_kernel(o.conv_kernel, o.precision, at::kCPU);
  mo.conv.use = std::make_shared<kernels::KernelUse>();
  mo.conv.register_choices();
  mo.norm.kernel =
      imgcls::resolve_norm_kernel(o.norm_kernel, o.precision, at::kCPU, o.channels_last != 0);
  mo.norm.use = mo.conv.use;
  mo.norm.register_choices();

  // Model, then images, then labels from one seed: resnet_step.py draws them in the same order
  // (torchvision consumes the generator as our constructor does), so both sides start from the
  // same weights and data; the driver checks it through loss0.
  torch::manual_seed(o.seed);
  imgcls::ResNet net(mo);
  net->train();
  at::Tensor images = at::randn({o.batch, 3, o.image_size, o.image_size});  // (N, 3, H, W)
  const at::Tensor labels = at::randint(0, o.classes, {o.batch});           // (N), int64
  if (o.channels_last != 0) {
    imgcls::set_memory_format(*net, at::MemoryFormat::ChannelsLast);
    images = images.contiguous(at::MemoryFormat::ChannelsLast);
  }
  const auto sgd = torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4);
  std::unique_ptr<torch::optim::SGD> optimizer =
      o.optimizer_kernel == "fused" ? std::make_unique<kernels::FusedSGD>(net->parameters(), sgd)
                                    : std::make_unique<torch::optim::SGD>(net->parameters(), sgd);
  nn::AutocastState amp_state = nn::AutocastState::current().disabled();
  amp_state.cpu_enabled = bf16;
  amp_state.cpu_dtype = at::kBFloat16;
  int64_t params = 0;
  for (const at::Tensor& p : net->parameters()) params += p.numel();

  std::vector<StepPhases> phases;
  double loss0 = 0.0;  // loss of the first step, before any update
  auto step = [&]() {
    StepPhases ph;
    core::Stopwatch clock;
    at::Tensor logits;  // (N, K)
    {
      nn::AutocastGuard amp(amp_state);
      logits = net->forward(images);
    }
    // Python's autocast clears its weight-cast cache when the outermost region exits; do the same.
    if (bf16) at::autocast::clear_cache();
    ph.forward_s = clock.elapsed_s();
    // Outside autocast, in fp32 on both sides (bf16 logits are cast up first).
    const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), labels);
    ph.loss_s = clock.elapsed_s() - ph.forward_s;
    train::clear_gradients(*optimizer);
    loss.backward();
    ph.backward_s = clock.elapsed_s() - ph.forward_s - ph.loss_s;
    optimizer->step();
    const double value = loss.item<double>();
    ph.optimizer_s = clock.elapsed_s() - ph.forward_s - ph.loss_s - ph.backward_s;
    if (phases.empty()) loss0 = value;
    phases.push_back(ph);
  };

  const int64_t rss_before_bytes = proc_status_bytes("VmRSS");
  for (int i = 0; i < o.warmup_steps; ++i) step();
  std::vector<double> step_s;
  const CpuSample cpu_before = sample_cpu();
  for (int i = 0; i < o.timed_steps; ++i) {
    core::Stopwatch clock;
    step();
    step_s.push_back(clock.elapsed_s());
  }
  const double other_cpu = other_cpu_share(cpu_before, sample_cpu());
  const int64_t hwm_bytes = proc_status_bytes("VmHWM");  // before any traced step
  if (!o.trace.empty()) {  // after the timed steps, so the profiler costs them nothing
    {
      torch::autograd::profiler::RecordProfile record(o.trace);
      step();
    }
    phases.pop_back();
    fmt::print("  trace of one more step (LibTorch's profiler, Chrome JSON): {}\n", o.trace);
  }
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

  const core::Spread spread = core::spread(step_s);
  const double step_ms = spread.median * 1e3;
  const double images_per_s = o.batch / spread.median;
  // Forward + 2x forward for backward (input and weight gradients), per image, times the batch.
  const double flop_step =
      3.0 * static_cast<double>(imgcls::resnet_forward_flops(mo, o.image_size, o.image_size)) *
      o.batch;
  const double rate = flop_step / spread.median / 1e9;
  const char* layout = o.channels_last != 0 ? "nhwc" : "nchw";
  fmt::print(
      "bench_resnet_step (C++ LibTorch {}, scaffold {} {}): resnet{}, batch {}, {}x{} images, {} "
      "classes, {}, {}, {} threads, {} parameters\n",
      core::torch_version_built_with(), core::version(), core::git_commit(), o.depth, o.batch,
      o.image_size, o.image_size, o.classes, bf16 ? "bf16 autocast" : "fp32",
      o.channels_last != 0 ? "channels-last" : "NCHW", threads, params);
  fmt::print(
      "  step: median {:.1f} ms (min {:.1f}, max {:.1f}) of {} after {} warm-up; {:.1f} images/s; "
      "{:.2f} GFLOP -> {:.1f} GFLOP/s\n",
      step_ms, spread.min * 1e3, spread.max * 1e3, o.timed_steps, o.warmup_steps, images_per_s,
      flop_step / 1e9, rate);
  fmt::print(
      "  phases (medians): forward {:.1f} ms, loss {:.1f} ms, zero_grad + backward {:.1f} ms, "
      "SGD + item {:.1f} ms\n",
      forward_ms, loss_ms, backward_ms, optimizer_ms);
  fmt::print(
      "  memory: VmRSS before the first step {:.0f} MiB, VmHWM after the steps {:.0f} MiB "
      "(+{:.0f} MiB); first-step loss {:.6f}\n",
      rss_before_bytes / kMiB, hwm_bytes / kMiB, (hwm_bytes - rss_before_bytes) / kMiB, loss0);
  fmt::print("  other processes used {:.0f}% of the machine's CPU time during the timed steps\n",
             other_cpu * 100);
  fmt::print("  kernels: 3x3 convolutions {}, BatchNorm + ReLU {} (ran: {})\n",
             imgcls::to_string(mo.conv.kernel), imgcls::to_string(mo.norm.kernel),
             fmt::join(mo.conv.use->summary(), "; "));
  for (const std::string& line : kernels::probe_verdicts().lines())
    fmt::print("  probe: {}\n", line);
  // One machine-readable line; resnet_step.py prints the same keys.
  fmt::print(
      "result impl=cpp depth={} batch={} image={} classes={} dtype={} layout={} threads={} "
      "params={} step_ms={:.2f} step_ms_min={:.2f} step_ms_max={:.2f} images_per_s={:.2f} "
      "step_gflop={:.3f} model_gflop_per_s={:.2f} rss_before_mib={:.1f} peak_rss_mib={:.1f} "
      "peak_rss_delta_mib={:.1f} loss0={:.6f} forward_ms={:.2f} loss_ms={:.2f} backward_ms={:.2f} "
      "optimizer_ms={:.2f} other_cpu={:.3f} conv_kernel={} norm_kernel={} optimizer_kernel={}\n",
      o.depth, o.batch, o.image_size, o.classes, o.precision, layout, threads, params, step_ms,
      spread.min * 1e3, spread.max * 1e3, images_per_s, flop_step / 1e9, rate,
      rss_before_bytes / kMiB, hwm_bytes / kMiB, (hwm_bytes - rss_before_bytes) / kMiB, loss0,
      forward_ms, loss_ms, backward_ms, optimizer_ms, other_cpu, imgcls::to_string(mo.conv.kernel),
      imgcls::to_string(mo.norm.kernel), o.optimizer_kernel);
  return 0;
}

// Parses and checks the flags, then runs. Usage errors exit 2 (CLI11's own codes for its checks).
int parse_and_run(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{"Time one ResNet training step (forward, cross-entropy, backward, SGD)"};
  app.add_option("--depth", o.depth, "ResNet depth")->check(CLI::IsMember({18, 34, 50, 101, 152}));
  app.add_option("--batch", o.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--image-size", o.image_size, "side of the square images (pixels)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--classes", o.classes, "classes (width of fc)")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "intra-op threads (0: OMP_NUM_THREADS or all CPUs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--steps", o.timed_steps, "timed steps (the median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup_steps, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--channels-last", o.channels_last, "1: channels-last parameters and input")
      ->check(CLI::IsMember({0, 1}));
  app.add_option("--precision", o.precision, "fp32, or bf16 (CPU autocast in the forward)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--conv-kernel", o.conv_kernel,
                 "3x3 stride-1 convolutions: auto (probe in fp32, libtorch in bf16), probe "
                 "(per layer the fastest measured), winograd (oneDNN's), native_winograd, "
                 "libtorch")
      ->check(CLI::IsMember({"auto", "probe", "winograd", "native_winograd", "libtorch"}));
  app.add_option("--norm-kernel", o.norm_kernel,
                 "BatchNorm + ReLU pairs: auto (fused in fp32 with --channels-last 1, libtorch "
                 "otherwise), fused, libtorch")
      ->check(CLI::IsMember({"auto", "fused", "libtorch"}));
  app.add_option("--optimizer-kernel", o.optimizer_kernel,
                 "SGD's update: fused (one pass per parameter, the workload's default on a CPU) "
                 "or libtorch")
      ->check(CLI::IsMember({"fused", "libtorch"}));
  app.add_option("--seed", o.seed, "seed of the weights, images and labels");
  app.add_option("--trace", o.trace,
                 "write LibTorch's per-operator trace of one step after the timed ones to this "
                 "Chrome JSON file");
  CLI11_PARSE(app, argc, argv);
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
