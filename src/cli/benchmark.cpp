// `scaffold benchmark`: the ScaFFold benchmark as a phase-structured driver (docs/benchmark.md):
//   run folder -> fractals -> dataset -> model set-up -> warm-up -> timed training -> report.
// Each phase has one wall-clock timer; the figure of merit is the sum of the epoch durations
// (warm-up, data generation and set-up excluded, as ScaFFold's code measures it).
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <numeric>
#include <optional>
#include <vector>

#include "cli/phases.hpp"
#include "config/load.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/resources.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "core/version.hpp"
#include "core/watchdog.hpp"
#include "dataset/loader.hpp"
#include "dataset/plan.hpp"
#include "dist/comm_counters.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "energy/meter.hpp"
#include "model/fused_norm.hpp"
#include "model/spatial.hpp"
#include "model/unet.hpp"
#include "profile/options.hpp"
#include "profile/profiler.hpp"
#include "profile/torch_ops.hpp"
#include "profile/trace.hpp"
#include "report/figures.hpp"
#include "report/restart.hpp"
#include "report/run_dir.hpp"
#include "report/run_record.hpp"
#include "report/system_info.hpp"
#include "report/train_stats.hpp"
#include "suite/command_line.hpp"
#include "suite/phases.hpp"
#include "suite/record.hpp"
#include "suite/run_folder.hpp"
#include "suite/stop_signals.hpp"
#include "train/device.hpp"
#include "train/device_memory.hpp"
#include "train/loss.hpp"
#include "train/trainer.hpp"

namespace scaffold::cli {
namespace {
namespace fs = std::filesystem;

struct BenchmarkArgs {
  ConfigArgs config;
  bool allow_large_data = false;  // --allow-large-data
  std::string run_dir;            // --run-dir: resume in this run folder (--restart needs it)
  std::vector<std::string> argv;  // the command line after the executable, for restart.sh
};

// The kernel keys (conv_kernel, upconv_kernel, groupnorm_kernel, pool_kernel) resolved for this
// device.
model::UNetKernels unet_kernels(const config::Config& cfg, const c10::Device& device) {
  return model::resolve_unet_kernels(
      cfg.conv_kernel, cfg.upconv_kernel, cfg.groupnorm_kernel, cfg.pool_kernel, device,
      train::use_channels_last(cfg.memory_format, device), cfg.torch_amp);
}

void log_summary(const config::Config& cfg, const train::TrainResult& result,
                 const std::vector<report::EpochRecord>& records, const suite::PhaseDriver& phases,
                 const model::UNetOptions& model_options, int64_t params, const c10::Device& device,
                 const dist::ProcessGrid& grid, const train::CommTimes& comm) {
  const double total_s = std::accumulate(
      records.begin(), records.end(), 0.0,
      [](double s, const report::EpochRecord& r) { return s + r.epoch_duration_s; });
  const int64_t epochs = records.empty() ? 0 : records.back().epoch;
  const int64_t steps = records.empty() ? 0 : records.back().total_optimizer_steps;
  // The FOM is a time to solution: printed whenever the run reached the target (ScaFFold prints
  // it only for epochs == -1, where reaching the target is the only way to finish).
  if (result.converged && total_s > 0) {
    LOG_INFO("FOM = {:.6g} (1/total_train_time, 1/s)", 1.0 / total_s);
    LOG_INFO(
        "FOM depends on: problem_scale={}, target_dice={}, n_categories={}, "
        "n_instances_used_per_fractal={}, "
        "unet_bottleneck_dim={}, unet_base_channels={}, optimizer={}, starting_learning_rate={}, "
        "min_learning_rate={}, T_0={}, T_mult={}, disable_scheduler={}, dc_shard_dims=[{}]",
        cfg.problem_scale, cfg.target_dice, cfg.n_categories, cfg.n_instances_used_per_fractal,
        cfg.unet_bottleneck_dim, cfg.unet_base_channels, cfg.optimizer, cfg.starting_learning_rate,
        cfg.min_learning_rate, cfg.T_0, cfg.T_mult, int(cfg.disable_scheduler),
        fmt::join(cfg.dc_shard_dims, ", "));
  }
  LOG_INFO("Benchmark run at scale {} complete.", cfg.problem_scale);
  if (result.converged)
    LOG_INFO(
        "Trained to >= {} validation dice score in {:.2f} seconds, {} epochs, {} optimizer steps.",
        core::python_float_str(cfg.target_dice), total_s, epochs, steps);
  else
    LOG_INFO(
        "Completed in {:.2f} seconds, {} epochs, {} optimizer steps (validation dice {:.4f} < "
        "target {}).",
        total_s, epochs, steps, result.final_val_dice, core::python_float_str(cfg.target_dice));
  const double median_s = core::median(result.step_times_s);
  const double flops_fwd = model::unet_forward_flops(model_options, cfg.vol_size());
  // A step trains the global batch (fwd + 2x bwd); with spatial shards each rank does a share.
  const double flops_step =
      3.0 * flops_fwd * static_cast<double>(cfg.local_batch_size * grid.replicas());
  LOG_INFO(
      "model: {} parameters, {:.4g} GFLOP per sample forward (x3 for a training step); median step "
      "{:.1f} ms at global batch {}: {:.4g} GFLOP/s achieved on {} rank(s) ({})",
      params, flops_fwd / 1e9, median_s * 1e3, cfg.local_batch_size * grid.replicas(),
      median_s > 0 ? flops_step / median_s / 1e9 : 0.0, grid.world_size(), device.str());
  if (grid.world_size() > 1) {
    const double step_total =
        std::accumulate(result.step_times_s.begin(), result.step_times_s.end(), 0.0);
    auto share = [&](double s) { return step_total > 0 ? 100.0 * s / step_total : 0.0; };
    LOG_INFO(
        "communication (rank 0, timed training steps): halo exchange {:.2f} s ({:.1f}% of step "
        "time), "
        "waiting for gradient all-reduce {:.2f} s ({:.1f}%)",
        comm.seconds_of(dist::kCommHalo), share(comm.seconds_of(dist::kCommHalo)),
        comm.gradient_wait_s, share(comm.gradient_wait_s));
  }
  const int64_t device_peak = train::device_peak_allocated_bytes(device);
  LOG_INFO("peak memory: process RSS {:.2f} GiB{}",
           static_cast<double>(core::peak_rss_bytes()) / (1 << 30),
           device_peak >= 0 ? fmt::format(", {} allocated {:.2f} GiB", device.str(),
                                          static_cast<double>(device_peak) / (1 << 30))
                            : std::string());
  LOG_INFO(
      "phase wall times: fractals {:.2f} s, dataset {:.2f} s, model set-up {:.2f} s, warm-up "
      "{:.2f} s, "
      "training {:.2f} s",
      phases.seconds("fractals"), phases.seconds("get_dataset"), phases.seconds("init_model"),
      phases.seconds("warmup_phase"), phases.seconds("training"));
}

// Energy to the target and efficiency, over the same windows as the time to solution.
void log_energy(const config::Config& cfg, const train::TrainResult& result,
                const std::vector<report::EpochRecord>& records,
                const std::vector<report::EnergyWindowRecord>& rows, int replicas) {
  double wh = 0.0, seconds = 0.0, warmup_wh = 0.0;
  for (const auto& r : rows) {
    if (r.window == "warmup") {
      warmup_wh += r.energy_wh;
      continue;
    }
    wh += r.energy_wh;
    seconds += r.duration_s;
  }
  int64_t steps = records.empty() ? 0 : records.back().total_optimizer_steps;
  const double samples =
      static_cast<double>(steps * cfg.local_batch_size * replicas);  // all replicas
  LOG_INFO(
      "energy {} {:.4g} Wh ({:.4g} J) over {:.2f} s of epochs: average power {:.1f} W, {:.4g} "
      "training samples per Wh; warm-up {:.4g} Wh (excluded)",
      result.converged ? "to the target:" : "of the epochs:", wh, wh * 3600.0, seconds,
      seconds > 0 ? wh * 3600.0 / seconds : 0.0, wh > 0 ? samples / wh : 0.0, warmup_wh);
}

// The process grid of this run, after every layout check that needs no data (docs/distributed.md):
// the world a multiple of the spatial group, and a global batch both splits can fill. (Local
// extents that stay even down to the bottleneck are a config check.) Every rank agrees, before
// anything runs.
dist::ProcessGrid checked_process_grid(dist::Communicator& comm, const config::Config& cfg) {
  std::optional<dist::ProcessGrid> grid;
  dist::run_agreed(comm, [&] {
    grid.emplace(comm.size(), comm.rank(), cfg.dc_num_shards, cfg.dc_shard_dims);
    const dataset::PlanOptions plan = dataset::plan_options(dataset_key(cfg));
    const int64_t volumes = dataset::planned_volumes(plan);
    const int64_t validation = dataset::planned_validation_volumes(plan);
    const int64_t global_batch = int64_t{cfg.local_batch_size} * grid->replicas();
    // Name only the split that is too small.
    std::vector<std::string> too_small;
    if (global_batch > volumes - validation)
      too_small.push_back(fmt::format("the training split ({} volumes)", volumes - validation));
    if (global_batch > validation)
      too_small.push_back(fmt::format("the validation split ({} volumes)", validation));
    if (!too_small.empty())
      throw core::Error(
          fmt::format("global batch {} (local_batch_size {} x {} data-parallel replicas = {} ranks "
                      "/ prod(dc_num_shards) {}) "
                      "is larger than {}; lower local_batch_size or the number of ranks, or raise "
                      "n_instances_used_per_fractal",
                      global_batch, cfg.local_batch_size, grid->replicas(), comm.size(),
                      grid->spatial_size(), fmt::join(too_small, " and ")));
  });
  return *grid;
}

// Runs `step` (building the model, or training steps); a failed memory allocation in it becomes
// an error that names what it tried and the keys that size the U-Net, instead of LibTorch's bare
// "can't allocate memory" and its backtrace. Other errors pass unchanged.
template <class Step>
auto sized_by_model_keys(const config::Config& cfg, const c10::Device& device, const char* doing,
                         Step&& step) {
  try {
    return step();
  } catch (const std::exception& e) {
    const std::optional<core::AllocationFailure> failure = core::allocation_failure(e);
    if (!failure) throw;
    const std::string asked =
        failure->bytes >= 0
            ? fmt::format("an allocation of {} ({} bytes)",
                          core::human_bytes(static_cast<double>(failure->bytes)), failure->bytes)
            : std::string("an allocation");
    const int64_t widest = int64_t{cfg.unet_base_channels} << cfg.unet_layers();
    throw core::Error(fmt::format(
        "not enough memory on {} to {}: {} failed ({}). The U-Net's size follows from "
        "unet_base_channels = {} "
        "(doubled at each of its {} levels: {} channels at the bottleneck; weights grow with its "
        "square), "
        "problem_scale = {} ({}^3 voxels per volume) and local_batch_size = {} (activations grow "
        "with both): lower "
        "them, split each volume over more ranks (dc_num_shards), or set activation_checkpointing: "
        "1",
        device.str(), doing, asked, failure->first_line, cfg.unet_base_channels, cfg.unet_layers(),
        widest, cfg.problem_scale, cfg.vol_size(), cfg.local_batch_size));
  }
}

// Everything the model phase builds: the datasets, the U-Net, its parallel context and trainer.
struct BenchmarkModel {
  std::unique_ptr<dataset::FractalDataset> train_set, val_set;
  model::UNetOptions options;
  int64_t params = 0;
  std::unique_ptr<dist::Communicator> spatial_comm;
  std::unique_ptr<train::Trainer> trainer;
};

BenchmarkModel build_model(RunContext& ctx, const config::Config& cfg,
                           const dataset::DatasetInfo& data, const dist::ProcessGrid& grid,
                           const c10::Device& device, const fs::path& run_dir,
                           profile::Profiler* profiler) {
  BenchmarkModel m;
  const dataset::ShardLayout layout(data.meta.dc_num_shards, data.meta.dc_shard_dims);
  const dataset::DatasetPaths paths{data.root};
  m.train_set = std::make_unique<dataset::FractalDataset>(paths, dataset::Split::Training, layout,
                                                          grid.shard_id(), cfg.vol_size());
  m.val_set = std::make_unique<dataset::FractalDataset>(paths, dataset::Split::Validation, layout,
                                                        grid.shard_id(), cfg.vol_size());
  // A label outside the run's classes is named with its mask file and voxel when it is read.
  m.train_set->set_class_count(int64_t{cfg.n_categories} + 1);
  m.val_set->set_class_count(int64_t{cfg.n_categories} + 1);
  dataset::check_same_ids(ctx.comm, *m.train_set);
  dataset::check_same_ids(ctx.comm, *m.val_set);

  model::UNetOptions& mo = m.options;
  mo.n_classes = cfg.n_categories + 1;
  mo.layers = cfg.unet_layers();
  mo.base_channels = cfg.unet_base_channels;
  mo.group_norm_groups = cfg.group_norm_groups;
  mo.activation_checkpointing = cfg.activation_checkpointing;
  mo.kernels = unet_kernels(cfg, device);
  if (cfg.torch_amp && !model::bf16_pool_and_upsample_work(device)) {
    mo.fp32_pool_and_upsample = true;
    if (!mo.kernels.native_pool || !mo.kernels.gemm_upconv)
      LOG_INFO("bf16 autocast: {} in fp32 (this LibTorch has no working bf16 kernel for {} on {})",
               !mo.kernels.native_pool && !mo.kernels.gemm_upconv
                   ? "max-pooling and transposed convolution run"
               : mo.kernels.native_pool ? "transposed convolution runs"
                                        : "max-pooling runs",
               !mo.kernels.native_pool && !mo.kernels.gemm_upconv ? "them" : "it", device.str());
  }
  // Spatial parallelism: ranks of one replica (consecutive ranks) form the sample's group. Every
  // rank has the same grid, so all of them split (a collective) or none does.
  train::Parallelism parallel;
  if (ctx.comm.size() > 1) parallel.world = dist::make_tensor_comm(ctx.comm, device);
  if (grid.spatial_size() > 1) {
    m.spatial_comm = ctx.comm.split(grid.replica(), grid.shard_id());
    auto spatial =
        model::make_spatial_context(dist::make_tensor_comm(*m.spatial_comm, device), grid,
                                    model::parse_group_norm_mode(cfg.dc_groupnorm));
    mo.spatial = spatial;
    parallel.spatial = spatial;
    const auto& nb = spatial->neighbours;
    LOG_DEBUG(
        "replica {}, shard {} of {}: D/H/W shard index [{}, {}, {}] of [{}, {}, {}], neighbour "
        "ranks "
        "in the group D {}/{}, H {}/{}, W {}/{} (-1: outer boundary)",
        grid.replica(), grid.shard_id(), grid.spatial_size(), spatial->coords[0],
        spatial->coords[1], spatial->coords[2], spatial->shards[0], spatial->shards[1],
        spatial->shards[2], nb[0].lo, nb[0].hi, nb[1].lo, nb[1].hi, nb[2].lo, nb[2].hi);
  }
  if (ctx.comm.size() > 1)
    LOG_INFO(
        "distributed: {} ranks on {} node(s) = {} data-parallel replica(s) x {} spatial shard(s) "
        "(dc_num_shards [{}] over dims [{}], GroupNorm {}); tensors over {}",
        ctx.comm.size(), ctx.comm.nodes(), grid.replicas(), grid.spatial_size(),
        fmt::join(cfg.dc_num_shards, ", "), fmt::join(cfg.dc_shard_dims, ", "), cfg.dc_groupnorm,
        parallel.world->backend());
  torch::manual_seed(cfg.seed);  // identical initial weights (rank 0's are broadcast as well)
  model::UNet3d net(mo);
  m.params = model::count_parameters(*net);

  train::TrainerOptions to;
  to.local_batch_size = cfg.local_batch_size;
  to.epochs = cfg.epochs;
  to.target_dice = cfg.target_dice;
  to.warmup_batches = cfg.warmup_batches;
  to.optimizer = cfg.optimizer;
  to.learning_rate = cfg.starting_learning_rate;
  to.min_learning_rate = cfg.min_learning_rate;
  to.T_0 = cfg.T_0;
  to.T_mult = cfg.T_mult;
  to.disable_scheduler = cfg.disable_scheduler;
  to.amp_bf16 = cfg.torch_amp;
  to.fused_loss = train::fused_loss_for(cfg.loss_kernel, device.is_cpu());
  to.channels_last = train::use_channels_last(cfg.memory_format, device);
  to.checkpoint_interval = cfg.checkpoint_interval;
  to.checkpoint_dir = run_dir / cfg.checkpoint_dir;
  to.async_save = cfg.async_save;
  to.seed = static_cast<uint64_t>(cfg.seed);
  to.n_classes = mo.n_classes;
  to.ce_weight_sample_fraction = cfg.ce_weight_sample_fraction;
  to.loader_workers = cfg.dataloader_num_workers;
  to.profiler = profiler;
  m.trainer = std::make_unique<train::Trainer>(net, to, *m.train_set, *m.val_set, device, ctx.comm,
                                               grid, parallel);
  LOG_INFO(
      "model: 3-D U-Net, {} layers, base {} channels, {} classes, {} parameters, on {} with {} "
      "thread(s), "
      "{} (memory_format: {}), {} GroupNorm + ReLU (groupnorm_kernel: {})",
      mo.layers, mo.base_channels, mo.n_classes, m.params, device.str(), ctx.threads,
      to.channels_last ? "channels-last 3-D" : "contiguous NCDHW", cfg.memory_format,
      model::to_string(mo.kernels.norm_kernel), cfg.groupnorm_kernel);
  m.trainer->estimate_class_weights();
  return m;
}

// The run record of a finished benchmark (summary.json), from the rows of train_stats.csv.
report::RunRecord benchmark_record(const config::Config& cfg, const fs::path& run_dir,
                                   const train::TrainResult& result,
                                   const std::vector<report::EpochRecord>& records,
                                   const std::vector<report::EnergyWindowRecord>& energy_rows,
                                   bool energy_active, dist::Communicator& comm,
                                   const dist::ProcessGrid& grid, const c10::Device& device,
                                   int threads, int64_t params, double flops_per_sample,
                                   const suite::PhaseDriver& phases) {
  report::RunRecord r = suite::base_record("benchmark", run_dir, comm, threads, device.str());
  const model::UNetKernels kernels = unet_kernels(cfg, device);
  double total_s = 0.0;
  for (const auto& e : records) total_s += e.epoch_duration_s;
  const int64_t steps = records.empty() ? 0 : records.back().total_optimizer_steps;
  const int64_t global_batch = int64_t{cfg.local_batch_size} * grid.replicas();
  r.status = result.converged
                 ? report::kStatusReachedTarget
                 : (result.stopped ? report::kStatusTimeLimit : report::kStatusNotReached);
  r.global_batch = global_batch;
  r.local_batch = cfg.local_batch_size;
  r.precision = cfg.torch_amp ? "bf16" : "fp32";
  r.epochs = records.empty() ? 0 : records.back().epoch;
  r.time_s = total_s;
  r.runtime_s = 0.0;
  for (const auto& p : phases.phases()) r.runtime_s += p.seconds;
  double wh = 0.0;
  for (const auto& w : energy_rows)
    if (w.window == "train" || w.window == "validation") wh += w.energy_wh;
  if (energy_active) r.energy_wh = wh;
  r.params = {
      {"model", "unet3d"},
      {"problem_scale", std::to_string(cfg.problem_scale)},
      {"unet_base_channels", std::to_string(cfg.unet_base_channels)},
      {"dc_num_shards", fmt::format("{}", fmt::join(cfg.dc_num_shards, "x"))},
      {"dc_groupnorm", grid.spatial_size() > 1 ? cfg.dc_groupnorm : std::string("-")},
      {"memory_format",
       train::use_channels_last(cfg.memory_format, device) ? "channels_last" : "contiguous"},
      {"conv_kernel", model::conv_kernel_name(kernels)},
      {"upconv_kernel", kernels.gemm_upconv ? "gemm" : "libtorch"},
      {"groupnorm_kernel", model::to_string(kernels.norm_kernel)},
      {"pool_kernel", kernels.native_pool ? "native" : "libtorch"},
      {"loss_kernel",
       train::fused_loss_for(cfg.loss_kernel, device.is_cpu()) ? "fused" : "libtorch"},
      {"target_dice", core::python_float_str(cfg.target_dice)},
      {"shards", std::to_string(grid.spatial_size())}};
  const double samples = static_cast<double>(steps * global_batch);
  const double median_s = core::median(result.step_times_s);
  r.counters.push_back(
      {"val_dice", result.final_val_dice, "", "validation Dice of the last epoch"});
  if (result.converged && total_s > 0)
    r.counters.push_back(
        {"fom", 1.0 / total_s, "1/s", "1 / time to solution (ScaFFold's figure of merit)"});
  r.counters.push_back({"time_to_solution_s", total_s, "s", "sum of the epoch durations"});
  r.counters.push_back({"samples_per_s", total_s > 0 ? samples / total_s : 0.0, "samples/s",
                        "training samples / sum of the epoch durations"});
  r.counters.push_back({"median_step_s", median_s, "s", "median timed training step on rank 0"});
  std::vector<double> durations;
  int64_t optimizer_steps = 0;
  for (const auto& e : records) {
    durations.push_back(e.epoch_duration_s);
    optimizer_steps += e.optimizer_steps;
  }
  if (!durations.empty())
    r.counters.push_back(
        {"median_epoch_s", core::median(durations), "s", "median of the epoch durations"});
  r.counters.push_back({"training_samples", static_cast<double>(optimizer_steps * global_batch), "",
                        "optimizer steps x global batch, over the epochs"});
  r.counters.push_back({"parameters", static_cast<double>(params), "", "trainable parameters"});
  r.counters.push_back(
      {"achieved_flop_per_s",
       median_s > 0 ? 3.0 * flops_per_sample * static_cast<double>(global_batch) / median_s : 0.0,
       "FLOP/s", "3 x forward FLOPs x global batch / median step"});
  if (energy_active && wh > 0)
    r.counters.push_back(
        {"samples_per_wh", samples / wh, "samples/Wh", "training samples / energy of the epochs"});
  return r;
}

int run_benchmark(RunContext& ctx, const BenchmarkArgs& args) {
  at::set_num_threads(ctx.threads);
  // PROFILE_TORCH=1: the first rank of each node records the named regions (docs/profiling.md).
  const profile::ProfileOptions profile_options = profile::profile_options_from_env();
  profile::Profiler profiler(profile::profiles_this_rank(profile_options, ctx.comm.local_rank()),
                             profile_options.schedule);
  if (profiler.enabled()) profile::record_torch_operators(profiler, profile_options);
  suite::PhaseDriver phases(&profiler);
  suite::install_stop_signals(ctx.stop_signals);

  // init: the config, the process grid, the run folder and its context.
  const config::Config cfg = load_config_everywhere(ctx.comm, args.config);
  const dist::ProcessGrid grid = checked_process_grid(ctx.comm, cfg);
  check_data_size(ctx, cfg, /*with_dataset=*/true, args.allow_large_data);  // before the run folder
  const fs::path run_dir = suite::prepare_run_folder(
      ctx.comm, suite::run_folder_request(cfg, args.config.files, args.config.given_flags(),
                                          args.run_dir, args.argv));
  std::optional<suite::SetupGuard> setup_guard(std::in_place, ctx.comm, run_dir,
                                               !args.run_dir.empty());
  LOG_INFO("benchmark: run folder {}", run_dir.string());
  // ScaFFold's worker set-up (docs/config.md, docs/distributed.md): each rank's GPU, then cuDNN
  // autotuning or deterministic algorithms.
  const train::DeviceChoice device_choice =
      train::select_device(cfg.device, cfg.device_sharing, ctx.comm);
  const c10::Device device = device_choice.device;
  train::apply_determinism(cfg.more_determinism);
  {
    report::SystemInfo info;
    info.gpu_model = train::device_model_name(device);
    info.device = device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx.threads;
    info.dc_num_shards = cfg.dc_num_shards;
    const model::UNetKernels kernels = unet_kernels(cfg, device);
    info.kernels = model::kernel_names(kernels);
    info.kernels.push_back(
        std::string("loss=") +
        (train::fused_loss_for(cfg.loss_kernel, device.is_cpu()) ? "fused" : "libtorch"));
    suite::write_run_context(ctx.comm, run_dir, info);
  }

  phases.run("fractals", [&] { ensure_fractal_library(ctx, cfg, args.allow_large_data); });
  const dataset::DatasetInfo data =
      phases.run("get_dataset", [&] { return ensure_dataset(ctx, cfg); });
  BenchmarkModel m = phases.run("init_model", [&] {
    return sized_by_model_keys(cfg, device, "build the model", [&] {
      return build_model(ctx, cfg, data, grid, device, run_dir, &profiler);
    });
  });
  train::Trainer& trainer = *m.trainer;

  std::unique_ptr<core::Watchdog> watchdog =
      suite::progress_watchdog(ctx.comm, cfg.progress_timeout_s);
  trainer.set_watchdog(&*watchdog);
  energy::EnergyMeter energy(ctx.comm);
  phases.set_energy_meter(&energy);
  const double warmup_s = phases.run("warmup_phase", [&] {
    return sized_by_model_keys(cfg, device, "run the warm-up steps",
                               [&] { return trainer.warmup(); });
  });
  energy.add_window("warmup", 0, trainer.warmup_start_mono_s(), trainer.warmup_end_mono_s());
  LOG_INFO("warm-up: {} steps and a validation pass in {:.2f} s (untimed, state restored)",
           trainer.warmup_steps(), warmup_s);

  train::TrainCounters start;
  if (!args.run_dir.empty()) start = trainer.resume(run_dir / cfg.checkpoint_dir);
  std::optional<report::TrainStatsCsv> csv;
  if (ctx.comm.rank() == 0)
    csv.emplace(args.run_dir.empty() ? report::TrainStatsCsv::open_fresh(run_dir)
                                     : report::TrainStatsCsv::open_resume(
                                           run_dir, start.epoch + 1, start.total_optimizer_steps));
  double total_s = 0;
  if (ctx.comm.rank() == 0)
    for (const auto& r : report::read_train_stats(run_dir / report::kTrainStatsFileName))
      total_s += r.epoch_duration_s;

  setup_guard.reset();  // training starts: the folder stays whatever happens now
  const train::TrainResult result = phases.run("training", [&] {
    return sized_by_model_keys(cfg, device, "train", [&] {
      return trainer.run([&](const train::EpochStats& e) {
        total_s += e.duration_s;
        LOG_INFO(
            "epoch {}: train_loss {:.6f}, val_loss {:.6f}, train_dice_score {:.4f}, val_dice_score "
            "{:.4f}, "
            "lr {:.6g}, optimizer_steps {}, total_optimizer_steps {}",
            e.epoch, e.overall_loss, e.val_loss_avg, e.train_dice, e.val_dice, e.next_lr,
            e.optimizer_steps, e.total_optimizer_steps);
        LOG_INFO(
            "epoch {}: {:.2f} s (train {:.2f} s, validation {:.2f} s), total train time {:.2f} s, "
            "median "
            "minibatch {:.1f} ms, steps {} this epoch, {} in total",
            e.epoch, e.duration_s, e.train_s, e.validation_s, total_s, e.median_step_s * 1e3,
            e.optimizer_steps, e.total_optimizer_steps);
        energy.add_window("train", e.epoch, e.start_mono_s, e.validation_start_mono_s);
        energy.add_window("validation", e.epoch, e.validation_start_mono_s, e.end_mono_s);
        if (csv)
          csv->append({e.epoch, e.epoch_loss, e.overall_loss, e.val_loss_epoch, e.val_loss_avg,
                       e.train_dice, e.val_dice, e.duration_s, e.optimizer_steps,
                       e.total_optimizer_steps});
      });
    });
  });
  trainer.set_watchdog(nullptr);
  watchdog.reset();
  const train::CommTimes comm_times = trainer.comm_times();
  phases.set_energy_meter(nullptr);
  const auto energy_rows = energy.finish(run_dir, start.epoch + 1);
  profiler.finish();
  if (profiler.enabled()) {
    profile::TraceFileNameParts name;
    name.host = core::host_name();
    name.rank = ctx.comm.rank();
    name.nodes = ctx.comm.nodes();
    name.world_size = ctx.comm.size();
    name.problem_scale = cfg.problem_scale;
    name.epochs = static_cast<int>(cfg.epochs);
    name.n_instances_used_per_fractal = cfg.n_instances_used_per_fractal;
    name.unix_time_s = static_cast<int64_t>(std::time(nullptr));
    profiler.export_chrome_trace(run_dir /
                                 profile::trace_file_name(name));  // logs where, or why not
  }

  // report: figures, the final lines and summary.json, all from the files the run wrote.
  if (ctx.comm.rank() == 0) {
    const auto records = report::read_train_stats(run_dir / report::kTrainStatsFileName);
    report::write_figures(
        run_dir, records,
        fmt::format("v={}, c={}, u={}", cfg.vol_size(), cfg.n_categories, cfg.unet_layers()));
    log_summary(cfg, result, records, phases, m.options, m.params, device, grid, comm_times);
    if (energy.active()) log_energy(cfg, result, records, energy_rows, grid.replicas());
    if (result.stopped)
      LOG_WARN(
          "stopped by {} after epoch {}: the files are complete up to that epoch; {} resumes the "
          "run",
          suite::signal_name(result.stop_signal), result.last_epoch,
          (run_dir / "restart.sh").string());
    report::write_summary_json(
        run_dir, benchmark_record(cfg, run_dir, result, records, energy_rows, energy.active(),
                                  ctx.comm, grid, device, ctx.threads, m.params,
                                  model::unet_forward_flops(m.options, cfg.vol_size()), phases));
  }
  return result.stopped ? suite::kExitStoppedBySignal : 0;
}

}  // namespace

Subcommand add_benchmark(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "benchmark",
      "run the ScaFFold benchmark: fractals, dataset, and training to the target Dice");
  auto args = std::make_shared<BenchmarkArgs>();
  for (int i = 1; i < argc; ++i) args->argv.emplace_back(argv[i]);
  auto threads = std::make_shared<int>(1);
  ConfigArgs* c = &args->config;
  add_config_files_option(sub, c);
  add_threads_option(sub, threads.get());
  add_allow_large_data_flag(sub, &args->allow_large_data);
  // Every key is a flag (--key-with-dashes), its help from the schema. The three fixed
  // compatibility keys (framework, dist, loss_freq) take no flag.
  add_schema_flags<config::Config>(sub, c, {"framework", "dist", "loss_freq"});
  auto* run_dir =
      sub->add_option("--run-dir", args->run_dir, "resume in this run folder (implies --restart)");
  // --run-dir resumes with or without --restart; the flag is kept for ScaFFold's command lines.
  sub->add_flag("--restart", "resume from the run folder's last checkpoint; needs --run-dir")
      ->needs(run_dir);
  return {sub, [args, threads](RunContext& ctx) {
            ctx.threads = *threads;
            return run_benchmark(ctx, *args);
          }};
}

}  // namespace scaffold::cli
