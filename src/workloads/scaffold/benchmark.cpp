// `scaffold benchmark`: the ScaFFold benchmark (docs/benchmark.md), run by the suite's driver
// (suite/driver.hpp) like every workload. Its own phases: fractals -> dataset (prepare_data) ->
// model set-up (build) -> warm-up (warm_up) -> timed training (the loop) -> report (finish).
// Each phase has one wall-clock timer; the figure of merit is the sum of the epoch durations
// (warm-up, data generation and set-up excluded, as ScaFFold's code measures it).
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <ctime>
#include <numeric>
#include <optional>
#include <vector>

#include "config/load.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/resources.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm_counters.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "energy/meter.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/fused_norm.hpp"
#include "profile/options.hpp"
#include "profile/profiler.hpp"
#include "profile/torch_ops.hpp"
#include "profile/trace.hpp"
#include "report/figures.hpp"
#include "report/run_record.hpp"
#include "report/system_info.hpp"
#include "report/train_stats.hpp"
#include "suite/command_line.hpp"
#include "train/device.hpp"
#include "workloads/scaffold/data_phases.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/plan.hpp"
#include "workloads/scaffold/loss.hpp"
#include "workloads/scaffold/model/spatial.hpp"
#include "workloads/scaffold/model/unet.hpp"
#include "workloads/scaffold/segmentation_task.hpp"
#include "workloads/scaffold/workload.hpp"

namespace scaffold::benchmark {
namespace {
namespace fs = std::filesystem;
using cli::RunContext;

// --allow-large-data, by its name in cli::WorkloadArgs::switches.
const char* const kAllowLargeData = "allow_large_data";

// The *_kernel keys resolved for this device, layout and precision: the one KernelChoice of the
// run, which builds the model and the task and fills system.json and summary.json.
model::KernelChoice resolve_kernels(const config::Config& cfg, const c10::Device& device) {
  model::KernelKeys keys;
  keys.conv = cfg.conv_kernel;
  keys.upconv = cfg.upconv_kernel;
  keys.groupnorm = cfg.groupnorm_kernel;
  keys.pool = cfg.pool_kernel;
  keys.head = cfg.head_kernel;
  keys.loss = cfg.loss_kernel;
  keys.optimizer_kernel = cfg.optimizer_kernel;
  keys.optimizer = cfg.optimizer;
  model::KernelTarget target;
  target.cpu = device.is_cpu();
  target.device = device.str();
  target.channels_last = train::use_channels_last(cfg.memory_format, device);
  target.bf16_autocast = cfg.torch_amp;
  target.bf16_products = kernels::cpu_has_bf16_products();
  target.onednn_built = kernels::dnnl_conv3d_built();
  return model::resolve_kernel_choice(keys, target);
}

// The closing lines (the driver adds the peak memory and the phases' wall times).
void log_summary(const config::Config& cfg, const train::LoopResult& result,
                 const std::vector<report::EpochRecord>& records,
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
        total_s, epochs, steps, result.final_stop_value, core::python_float_str(cfg.target_dice));
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
}

// Energy to the target and efficiency, over the same windows as the time to solution.
void log_energy(const config::Config& cfg, const train::LoopResult& result,
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

// A failed memory allocation while the run was `doing` something becomes an error that names what
// it tried and the keys that size the U-Net, instead of LibTorch's bare "can't allocate memory"
// and its backtrace. Other errors: returns, and the caller passes them on unchanged.
void explain_allocation_failure(const config::Config& cfg, const c10::Device& device,
                                const std::string& doing, const std::exception& e) {
  const std::optional<core::AllocationFailure> failure = core::allocation_failure(e);
  if (!failure) return;
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

// Runs `step` (building the model, or the warm-up) through explain_allocation_failure.
template <class Step>
auto sized_by_model_keys(const config::Config& cfg, const c10::Device& device, const char* doing,
                         Step&& step) {
  try {
    return step();
  } catch (const std::exception& e) {
    explain_allocation_failure(cfg, device, doing, e);
    throw;
  }
}

// Everything the model phase builds: the datasets, the U-Net, its parallel context and trainer.
struct BenchmarkModel {
  std::unique_ptr<dataset::FractalDataset> train_set, val_set;
  model::UNetOptions options;
  int64_t params = 0;
  std::unique_ptr<dist::ParallelLayout> spatial_layout;  // spatial groups x replicas
  SegmentationTraining training;                         // the task and the loop over it
};

BenchmarkModel build_model(const suite::RunEnv& env, const config::Config& cfg,
                           const dataset::DatasetInfo& data, const dist::ProcessGrid& grid,
                           const model::KernelChoice& kernels) {
  dist::Communicator& comm = env.comm;
  const c10::Device& device = env.device;
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
  dataset::check_same_ids(comm, *m.train_set);
  dataset::check_same_ids(comm, *m.val_set);

  model::UNetOptions& mo = m.options;
  mo.n_classes = cfg.n_categories + 1;
  mo.layers = cfg.unet_layers();
  mo.base_channels = cfg.unet_base_channels;
  mo.group_norm_groups = cfg.group_norm_groups;
  mo.activation_checkpointing = cfg.activation_checkpointing;
  mo.kernels = kernels;
  if (cfg.torch_amp && !model::bf16_pool_and_upsample_work(device)) {
    mo.fp32_pool_and_upsample = true;
    const bool native_pool = kernels.pool == model::PoolKernel::Native;
    const bool gemm_upconv = kernels.upconv == model::UpconvKernel::Gemm;
    if (!native_pool || !gemm_upconv)
      LOG_INFO("bf16 autocast: {} in fp32 (this LibTorch has no working bf16 kernel for {} on {})",
               !native_pool && !gemm_upconv ? "max-pooling and transposed convolution run"
               : native_pool                ? "transposed convolution runs"
                                            : "max-pooling runs",
               !native_pool && !gemm_upconv ? "them" : "it", device.str());
  }
  // Spatial parallelism: ranks of one replica (consecutive ranks) form the sample's group. Every
  // rank has the same grid, so all of them split (a collective) or none does.
  Parallelism parallel;
  if (comm.size() > 1) parallel.world = dist::make_tensor_comm(comm, device);
  if (grid.spatial_size() > 1) {
    m.spatial_layout = std::make_unique<dist::ParallelLayout>(comm, grid.spatial_size());
    auto spatial =
        model::make_spatial_context(dist::make_tensor_comm(m.spatial_layout->group(), device), grid,
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
  if (comm.size() > 1)
    LOG_INFO(
        "distributed: {} ranks on {} node(s) = {} data-parallel replica(s) x {} spatial shard(s) "
        "(dc_num_shards [{}] over dims [{}], GroupNorm {}); tensors over {}",
        comm.size(), comm.nodes(), grid.replicas(), grid.spatial_size(),
        fmt::join(cfg.dc_num_shards, ", "), fmt::join(cfg.dc_shard_dims, ", "), cfg.dc_groupnorm,
        parallel.world->backend());
  torch::manual_seed(cfg.seed);  // identical initial weights (rank 0's are broadcast as well)
  model::UNet3d net(mo);
  m.params = nn::count_parameters(*net);

  SegmentationOptions to;
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
  to.kernels = kernels;
  to.channels_last = train::use_channels_last(cfg.memory_format, device);
  to.checkpoint_interval = cfg.checkpoint_interval;
  to.checkpoint_dir = env.run_dir / cfg.checkpoint_dir;
  to.async_save = cfg.async_save;
  to.seed = static_cast<uint64_t>(cfg.seed);
  to.n_classes = mo.n_classes;
  to.ce_weight_sample_fraction = cfg.ce_weight_sample_fraction;
  to.loader_workers = cfg.dataloader_num_workers;
  to.profiler = &env.profiler;
  m.training =
      make_segmentation_training(net, to, *m.train_set, *m.val_set, device, comm, grid, parallel);
  LOG_INFO(
      "model: 3-D U-Net, {} layers, base {} channels, {} classes, {} parameters, on {} with {} "
      "thread(s), "
      "{} (memory_format: {}), {} GroupNorm + ReLU (groupnorm_kernel: {})",
      mo.layers, mo.base_channels, mo.n_classes, m.params, device.str(), env.threads,
      to.channels_last ? "channels-last 3-D" : "contiguous NCDHW", cfg.memory_format,
      model::to_string(kernels.norm), cfg.groupnorm_kernel);
  m.training.task->estimate_class_weights(comm);
  return m;
}

// The run record of a finished benchmark (summary.json), from the rows of train_stats.csv; `r`
// has the driver's fields (workload, system, ranks, status, runtime).
void fill_record(report::RunRecord& r, const config::Config& cfg, const train::LoopResult& result,
                 const std::vector<report::EpochRecord>& records, const suite::EnergyResult& energy,
                 const dist::ProcessGrid& grid, const c10::Device& device, int64_t params,
                 double flops_per_sample, const model::KernelChoice& kernels) {
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
  const std::optional<double> epochs_wh = energy.sum_wh({"train", "validation"});
  const double wh = epochs_wh.value_or(0.0);
  if (epochs_wh) r.energy_wh = wh;
  r.params = {
      {"model", "unet3d"},
      {"problem_scale", std::to_string(cfg.problem_scale)},
      {"unet_base_channels", std::to_string(cfg.unet_base_channels)},
      {"dc_num_shards", fmt::format("{}", fmt::join(cfg.dc_num_shards, "x"))},
      {"dc_groupnorm", grid.spatial_size() > 1 ? cfg.dc_groupnorm : std::string("-")},
      {"memory_format",
       train::use_channels_last(cfg.memory_format, device) ? "channels_last" : "contiguous"},
      {"conv_kernel", model::to_string(kernels.conv)},
      {"upconv_kernel", model::to_string(kernels.upconv)},
      {"groupnorm_kernel", model::to_string(kernels.norm)},
      {"pool_kernel", model::to_string(kernels.pool)},
      {"head_kernel", model::to_string(kernels.head)},
      {"loss_kernel", model::to_string(kernels.loss)},
      {"optimizer_kernel", model::to_string(kernels.optimizer)},
      {"target_dice", core::python_float_str(cfg.target_dice)},
      {"shards", std::to_string(grid.spatial_size())}};
  const double samples = static_cast<double>(steps * global_batch);
  const double median_s = core::median(result.step_times_s);
  r.counters.push_back(
      {"val_dice", result.final_stop_value, "", "validation Dice of the last epoch"});
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
  if (epochs_wh && wh > 0)
    r.counters.push_back(
        {"samples_per_wh", samples / wh, "samples/Wh", "training samples / energy of the epochs"});
}

// A run of the benchmark: the driver's hooks (suite/driver.hpp).
class BenchmarkRun : public suite::WorkloadRun {
 public:
  BenchmarkRun(const config::Config& cfg, const cli::WorkloadArgs& args)
      : cfg_(cfg), allow_large_data_(args.switch_on(kAllowLargeData)) {}

  // The process grid, and the size of the data the run would write, before the run folder.
  void layout(suite::RunEnv& env) override {
    // PROFILE_TORCH=1: the first rank of each node records LibTorch's operators too.
    if (env.profiler.enabled())
      profile::record_torch_operators(env.profiler, profile::profile_options_from_env());
    device_ = env.device;
    grid_.emplace(checked_process_grid(env.comm, cfg_));
    kernels_ = resolve_kernels(cfg_, env.device);
    RunContext ctx = context(env);
    check_data_size(ctx, cfg_, /*with_dataset=*/true, allow_large_data_);
  }
  // No estimate of the U-Net's memory yet: a failed allocation names the keys that size it
  // (explain_allocation_failure).
  core::MemoryEstimate memory_estimate(const suite::RunEnv&) const override { return {}; }

  // ScaFFold's worker set-up (docs/config.md): cuDNN autotuning or deterministic algorithms.
  void describe(suite::RunEnv&, report::SystemInfo& info) override {
    train::apply_determinism(cfg_.more_determinism);
    info.dc_num_shards = cfg_.dc_num_shards;
    info.kernels = kernels_.names();
    info.kernel_fallbacks = kernels_.fallbacks;
  }

  std::string data_phase() const override { return {}; }  // fractals, get_dataset
  void prepare_data(suite::RunEnv& env) override {
    RunContext ctx = context(env);
    env.phases.run("fractals", [&] { ensure_fractal_library(ctx, cfg_, allow_large_data_); });
    data_ = env.phases.run("get_dataset", [&] { return ensure_dataset(ctx, cfg_); });
  }
  void build(suite::RunEnv& env) override {
    model_ = sized_by_model_keys(cfg_, env.device, "build the model",
                                 [&] { return build_model(env, cfg_, *data_, *grid_, kernels_); });
  }
  train::TrainingLoop* loop() override { return model_.training.loop.get(); }

  void warm_up(suite::RunEnv& env, energy::EnergyMeter& energy) override {
    train::TrainingLoop& loop = *model_.training.loop;
    const double warmup_s = env.phases.run("warmup_phase", [&] {
      return sized_by_model_keys(cfg_, env.device, "run the warm-up steps",
                                 [&] { return loop.warmup(); });
    });
    energy.add_window("warmup", 0, loop.warmup_start_mono_s(), loop.warmup_end_mono_s());
    LOG_INFO("warm-up: {} steps and a validation pass in {:.2f} s (untimed, state restored)",
             loop.warmup_steps(), warmup_s);
  }
  void explain_failure(const std::exception& error, const std::string& doing) override {
    explain_allocation_failure(cfg_, device_, doing, error);
  }

  void resume_rows(suite::RunEnv& env, const train::TrainCounters& start) override {
    csv_.emplace(report::TrainStatsCsv::open_resume(env.run_dir, start.epoch + 1,
                                                    start.total_optimizer_steps));
  }
  void before_training(suite::RunEnv& env) override {
    if (env.comm.rank() != 0) return;
    if (!csv_) csv_.emplace(report::TrainStatsCsv::open_fresh(env.run_dir));
    for (const auto& r : report::read_train_stats(env.run_dir / report::kTrainStatsFileName))
      total_s_ += r.epoch_duration_s;
  }
  void on_epoch(suite::RunEnv&, const train::LoopEpoch& le) override {
    const EpochStats e = epoch_stats(le);
    total_s_ += e.duration_s;
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
        e.epoch, e.duration_s, e.train_s, e.validation_s, total_s_, e.median_step_s * 1e3,
        e.optimizer_steps, e.total_optimizer_steps);
    if (csv_)
      csv_->append({e.epoch, e.epoch_loss, e.overall_loss, e.val_loss_epoch, e.val_loss_avg,
                    e.train_dice, e.val_dice, e.duration_s, e.optimizer_steps,
                    e.total_optimizer_steps});
  }

  // The communication times of the timed steps, and the Chrome trace under ScaFFold's file name.
  void after_training(suite::RunEnv& env, const train::LoopResult&) override {
    comm_times_ = model_.training.loop->comm_times();
    if (!env.profiler.enabled()) return;
    profile::TraceFileNameParts name;
    name.host = core::host_name();
    name.rank = env.comm.rank();
    name.nodes = env.comm.nodes();
    name.world_size = env.comm.size();
    name.problem_scale = cfg_.problem_scale;
    name.epochs = static_cast<int>(cfg_.epochs);
    name.n_instances_used_per_fractal = cfg_.n_instances_used_per_fractal;
    name.unix_time_s = static_cast<int64_t>(std::time(nullptr));
    env.profiler.export_chrome_trace(env.run_dir /
                                     profile::trace_file_name(name));  // logs where, or why not
  }

  // What rank 0's ops ran, counted call by call, and the fallbacks met while training.
  void describe_after_training(report::SystemInfo& info) override {
    info.kernels_run = kernels_.use->summary();
    for (std::string& line : kernels_.use->fallbacks())
      info.kernel_fallbacks.push_back(std::move(line));
  }

  // Figures, the closing lines and the record, all from the files the run wrote.
  bool finish(suite::RunEnv& env, const train::LoopResult& result,
              const suite::EnergyResult& energy, report::RunRecord& rec) override {
    const auto records = report::read_train_stats(env.run_dir / report::kTrainStatsFileName);
    if (records.empty()) return false;
    report::write_figures(
        env.run_dir, records,
        fmt::format("v={}, c={}, u={}", cfg_.vol_size(), cfg_.n_categories, cfg_.unet_layers()));
    log_summary(cfg_, result, records, model_.options, model_.params, env.device, *grid_,
                comm_times_);
    if (energy.active) log_energy(cfg_, result, records, energy.rows, grid_->replicas());
    fill_record(rec, cfg_, result, records, energy, *grid_, env.device, model_.params,
                model::unet_forward_flops(model_.options, cfg_.vol_size()), kernels_);
    return true;
  }

 private:
  static RunContext context(const suite::RunEnv& env) {
    RunContext ctx{env.comm};
    ctx.threads = env.threads;
    return ctx;
  }

  const config::Config cfg_;
  const bool allow_large_data_;
  std::optional<dist::ProcessGrid> grid_;
  std::optional<dataset::DatasetInfo> data_;
  model::KernelChoice kernels_;  // resolved once, in layout()
  BenchmarkModel model_;
  c10::Device device_{c10::kCPU};             // for explain_failure
  std::optional<report::TrainStatsCsv> csv_;  // rank 0
  double total_s_ = 0.0;                      // the epochs' durations so far (rank 0)
  train::CommTimes comm_times_;
};

std::unique_ptr<suite::WorkloadRun> start_benchmark(const config::Config& cfg,
                                                    const cli::WorkloadArgs& args) {
  return std::make_unique<BenchmarkRun>(cfg, args);
}

}  // namespace

suite::Workload benchmark_workload() {
  cli::SubcommandExtras extras;
  // The three fixed compatibility keys take no flag.
  extras.keys_without_flag = {"framework", "dist", "loss_freq"};
  extras.add_flags = [](CLI::App* sub, cli::WorkloadArgs* args) {
    add_allow_large_data_flag(sub, &args->switches[kAllowLargeData]);
  };
  return suite::make_workload<config::Config>(
      "benchmark", "run the ScaFFold benchmark: fractals, dataset, and training to the target Dice",
      start_benchmark, std::nullopt, extras);
}

}  // namespace scaffold::benchmark
