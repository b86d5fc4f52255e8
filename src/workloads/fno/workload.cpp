// `scaffold fno`: CARAML's operator benchmark with a Fourier neural operator, as
// a phase-structured driver. train: init (config, grid of shard groups x replicas, run folder,
// context) -> data -> init_model (FNO, task, loop, one measured forward for the memory figures)
// -> training (warm-up epochs first, excluded by name) -> report (epoch_stats.csv, summary.json,
// CARAML's figures). eval (CARAML's `eval`): init -> init_model -> eval (timed inference on a
// fixed input shape) -> report. Ranks form groups of tp_size that share each example (its grid's
// first dimension split over them); the groups are data-parallel replicas, gradients reduced in
// buckets during backward over every rank.
#include "workloads/fno/workload.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/energy_meter.hpp"
#include "config/fno_options.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "profile/options.hpp"
#include "profile/profiler.hpp"
#include "report/run_record.hpp"
#include "suite/phases.hpp"
#include "suite/record.hpp"
#include "suite/run_folder.hpp"
#include "suite/stop_signals.hpp"
#include "train/device.hpp"
#include "train/device_memory.hpp"
#include "train/fused_adam.hpp"
#include "train/loop.hpp"
#include "workloads/fno/dist_fft.hpp"
#include "workloads/fno/fno.hpp"
#include "workloads/fno/memory.hpp"
#include "workloads/fno/memory_estimate.hpp"
#include "workloads/fno/metrics.hpp"
#include "workloads/fno/result_columns.hpp"
#include "workloads/fno/sources.hpp"
#include "workloads/fno/task.hpp"

namespace scaffold::fno {
namespace {
namespace fs = std::filesystem;
using config::FnoConfig;

constexpr double kMiB = 1024.0 * 1024.0;

using Args = cli::WorkloadArgs;

std::vector<int64_t> modes_of(const FnoConfig& cfg) {
  std::vector<int64_t> m;
  for (std::size_t i = 0; i < cfg.grid.size(); ++i)
    m.push_back(cfg.modes.size() == 1 ? cfg.modes[0] : cfg.modes[i]);
  return m;
}

std::string joined(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

bool recurrent(const FnoConfig& cfg) {
  return cfg.time_stepping == "recurrent";
}

FnoOptions model_options(const FnoConfig& cfg, const ProblemShape& shape) {
  FnoOptions o;
  o.in_channels = shape.in_channels;
  o.out_channels =
      recurrent(cfg) ? shape.step_channels : shape.out_channels;  // recurrent: one step
  o.modes = modes_of(cfg);
  o.width = cfg.width;
  o.layers = cfg.layers;
  o.projection_channels = cfg.projection_channels;
  o.grid_coordinates = cfg.grid_coordinates;
  o.bias = cfg.bias;
  o.lifting_layers = cfg.lifting_layers;
  o.projection_layers = cfg.projection_layers;
  o.gelu_after_last_layer = cfg.gelu_after_last_layer;
  return o;
}

LrSchedule lr_schedule(const FnoConfig& cfg) {
  LrSchedule s;
  s.kind = cfg.lr_scheduler;
  s.initial = cfg.learning_rate;
  s.step_size = cfg.lr_step_size;
  s.gamma = cfg.lr_gamma;
  s.t_max = cfg.lr_t_max;
  return s;
}

// operator_learning's own lines, on stdout (the logger writes to stderr), with its wording, so
// CARAML's JUBE patterns (docs/fno.md) read them from job.out. Rank 0 only, as its print_rank0.
void say(const std::string& line) {
  core::print_stdout_line(line);
}

// Python's round(x, 3) printed by print(): the shortest repr of the rounded value.
std::string round3(double x) {
  return core::python_float_str(std::round(x * 1000.0) / 1000.0);
}

FnoShape flop_shape(const FnoOptions& o, const std::vector<int64_t>& grid) {
  FnoShape s;
  s.in_channels = o.in_channels;
  s.out_channels = o.out_channels;
  s.grid = grid;
  s.modes = o.modes;
  s.width = o.width;
  s.layers = o.layers;
  s.projection_channels = o.projection_channels;
  s.grid_coordinates = o.grid_coordinates;
  s.lifting_layers = o.lifting_layers;
  s.projection_layers = o.projection_layers;
  return s;
}

// The model FLOPs of one example's prediction: one forward, or the rollout's t_out.
double example_forward_flops(const FnoConfig& cfg, const FnoOptions& mo,
                             const std::vector<int64_t>& grid) {
  return fno_forward_flops(flop_shape(mo, grid)) * (recurrent(cfg) ? cfg.t_out : 1);
}

FnoTaskOptions task_options(const FnoConfig& cfg, const ProblemShape& shape,
                            std::shared_ptr<FftShard> shard) {
  FnoTaskOptions to;
  to.precision = cfg.precision;
  to.field_relative = cfg.loss == "field_relative_l2";
  to.shard = std::move(shard);
  to.rollout_steps = recurrent(cfg) ? cfg.t_out : 0;
  to.step_channels = shape.step_channels;
  return to;
}

// The shard groups and replicas: checks the rank count on every rank alike.
struct Layout {
  std::unique_ptr<dist::ProcessGrid> grid;
  std::unique_ptr<dist::Communicator> group_comm;  // this rank's shard group (tp_size > 1)
  std::shared_ptr<FftShard> shard;                 // null when tp_size is 1
};

Layout make_layout(dist::Communicator& comm, const FnoConfig& cfg, const c10::Device& device) {
  Layout l;
  dist::run_agreed(comm, [&] {
    if (comm.size() % cfg.tp_size != 0)
      throw core::Error(fmt::format(
          "tp_size {} does not divide the {} rank(s): use a rank count that is a multiple "
          "of tp_size (ranks / tp_size data-parallel replicas)",
          cfg.tp_size, comm.size()));
    // Shard id = rank % tp_size: consecutive ranks share an example, as the U-Net's spatial groups.
    l.grid = std::make_unique<dist::ProcessGrid>(
        comm.size(), comm.rank(), std::vector<int>{cfg.tp_size}, std::vector<int>{2});
  });
  if (cfg.tp_size > 1) {
    l.group_comm = comm.split(l.grid->replica(), l.grid->shard_id());
    l.shard = std::make_shared<FftShard>();
    l.shard->group = dist::make_tensor_comm(*l.group_comm, device);
    l.shard->extent = cfg.grid[0];
  }
  return l;
}

suite::RunFolderRequest folder_request(const FnoConfig& cfg, const Args& args) {
  return suite::run_folder_request(cfg, args.config.files, args.config.given_flags(), args.run_dir,
                                   args.argv);
}

// The fields common to the train and eval records.
report::RunRecord fno_record(cli::RunContext& ctx, const fs::path& run_dir,
                             const c10::Device& device, const FnoConfig& cfg, const Args& args,
                             const dist::ProcessGrid& grid, const suite::PhaseDriver& phases) {
  report::RunRecord rec =
      suite::base_record(kWorkloadName, run_dir, ctx.comm, ctx.threads, device.str());
  rec.precision = cfg.precision;
  for (const auto& p : phases.phases()) rec.runtime_s += p.seconds;
  std::vector<int64_t> grid_points(cfg.grid.begin(), cfg.grid.end());
  rec.params = {{kParamProblem, cfg.problem},
                {kParamConfig, fs::path(args.config.files.front()).filename().string()},
                {kParamGrid, joined(grid_points, "x")},
                {kParamDataParallel, std::to_string(grid.replicas())},
                {kParamGridShards, std::to_string(cfg.tp_size)},
                {kParamMode, cfg.mode},
                {"modes", joined(modes_of(cfg), "x")},
                {"width", std::to_string(cfg.width)},
                {"layers", std::to_string(cfg.layers)},
                {"t_in", std::to_string(cfg.t_in)},
                {"t_out", std::to_string(cfg.t_out)},
                {"time_stepping", cfg.time_stepping},
                {"target", cfg.target},
                {"bias", cfg.bias ? "1" : "0"},
                {"lr_scheduler", cfg.lr_scheduler},
                {"loss", cfg.loss},
                {"optimizer", "Adam"}};
  return rec;
}

void log_epoch(const train::LoopEpoch& e, const FnoConfig& cfg, int64_t timesteps_per_example) {
  const auto& v = e.metrics.values;  // FnoTask's order
  const double tpe = static_cast<double>(timesteps_per_example);
  const double per_s =
      e.duration_s > 0 ? (e.train.samples + e.val.samples) * tpe / e.duration_s : 0.0;
  const double train_per_s = e.train_s > 0 ? e.train.samples * tpe / e.train_s : 0.0;
  const std::string which =
      e.warmup ? fmt::format("warm-up epoch {}/{}", e.epoch, cfg.warmup_epochs)
               : fmt::format("epoch {}/{}", e.epoch - cfg.warmup_epochs, cfg.epochs);
  LOG_INFO(
      "{}: train_rel_l2 {:.5f}, val_rel_l2 {:.5f}, val_mse {:.4g}, lr {:.4g} | {:.2f} s (train "
      "{:.2f} s, "
      "validation {:.2f} s) | Timesteps/s {:.1f}, TrainTimesteps/s {:.1f}, median step {:.1f} ms",
      which, v[0].second, v[1].second, v[2].second, e.next_lr, e.duration_s, e.train_s,
      e.validation_s, per_s, train_per_s, e.median_step_s * 1e3);
}

// One batch of the first `n` training examples (host tensors), for the memory measurement.
dataset::Batch first_batch(const dataset::ExampleSource& source, int64_t n) {
  std::vector<std::vector<at::Tensor>> fields;
  dataset::Batch b;
  for (int64_t i = 0; i < n; ++i) {
    dataset::Example e = source.get(static_cast<std::size_t>(i), 0);
    if (fields.empty()) fields.resize(e.fields.size());
    for (std::size_t f = 0; f < e.fields.size(); ++f) fields[f].push_back(e.fields[f]);
    b.ids.push_back(e.id);
  }
  for (auto& f : fields) b.fields.push_back(at::stack(f));
  return b;
}

// The configuration's lower-bound memory against this rank's (memory_estimate.hpp), before any
// data is generated or the run folder exists. Agreed.
void check_memory(dist::Communicator& comm, const FnoConfig& cfg, const c10::Device& device) {
  dist::run_agreed(comm, [&] {
    const ProblemShape shape = problem_shape(cfg);
    train::check_memory_budget_on(kWorkloadName,
                                  fno_memory_estimate(cfg, shape.in_channels, shape.out_channels),
                                  device, comm.local_size(), cfg.device_sharing);
  });
}

int run_train(cli::RunContext& ctx, const Args& args, const FnoConfig& cfg,
              suite::PhaseDriver& phases, profile::Profiler& profiler) {
  const train::DeviceChoice device_choice =
      train::select_device(cfg.device, cfg.device_sharing, ctx.comm);
  const c10::Device device = device_choice.device;
  Layout layout = make_layout(ctx.comm, cfg, device);
  const dist::ProcessGrid& grid = *layout.grid;
  check_memory(ctx.comm, cfg, device);
  const fs::path run_dir = suite::prepare_run_folder(ctx.comm, folder_request(cfg, args));
  std::optional<suite::SetupGuard> setup_guard(std::in_place, ctx.comm, run_dir,
                                               !args.run_dir.empty());
  LOG_INFO("fno: run folder {}", run_dir.string());
  {
    report::SystemInfo info;
    info.gpu_model = train::device_model_name(device);
    info.device = device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx.threads;
    suite::write_run_context(ctx.comm, run_dir, info);
  }

  // data: generated in situ into the cache (or reused from it), on every rank's threads.
  FnoData data;
  phases.run("data", [&] {
    data = make_fno_data(cfg, ctx.comm, ctx.threads);
    dist::run_agreed(ctx.comm, [&] {
      const dataset::Example e = data.train->get(0, 0);
      const auto expect = [&](const at::Tensor& t, int64_t channels, const char* what) {
        std::vector<int64_t> shape{channels};
        shape.insert(shape.end(), data.grid.begin(), data.grid.end());
        if (t.sizes() != shape)
          throw core::Error(fmt::format("problem {}: the {} field of example {} is {}, expected {}",
                                        cfg.problem, what, e.id, c10::str(t.sizes()),
                                        c10::str(at::IntArrayRef(shape))));
      };
      expect(e.fields.at(0), data.shape.in_channels, "input");
      expect(e.fields.at(1), data.shape.out_channels, "target");
    });
  });
  if (data.reused)
    LOG_INFO("data: reused {} ({:.2f} s)", data.root.string(), data.generate_s);
  else
    LOG_INFO("data: generated {} ({} samples, {} solver steps in {:.2f} s)", data.root.string(),
             data.samples_generated, data.solver_steps, data.generate_s);
  LOG_INFO(
      "data: {} on a {} grid ({} training, {} validation examples; {} -> {} channels, {} "
      "timestep(s) each), "
      "batch {} x {} replica(s), tp_size {}",
      data.problem, joined(data.grid, "x"), data.train->size(), data.val->size(),
      data.shape.in_channels, data.shape.out_channels, data.shape.timesteps_per_example,
      cfg.batch_size, grid.replicas(), cfg.tp_size);

  // model
  const FnoOptions mo = model_options(cfg, data.shape);
  // The learning rate after `done` epochs, i.e. the one epoch done + 1 runs at.
  const auto lr_after = [schedule = lr_schedule(cfg)](int64_t done) {
    return scheduled_lr(schedule, done);
  };
  std::unique_ptr<FnoTask> task;
  std::unique_ptr<train::TrainingLoop> loop;
  int64_t params = 0, size_bytes = 0;
  MemoryFigures memory;
  phases.run("init_model", [&] {
    torch::manual_seed(
        static_cast<uint64_t>(cfg.seed));  // identical initial weights (rank 0's broadcast too)
    Fno net(mo);
    params = count_parameters(*net);
    size_bytes = model_bytes(*net);
    FnoTaskOptions to = task_options(cfg, data.shape, layout.shard);
    to.profiler = &profiler;
    task = std::make_unique<FnoTask>(net, *data.train, *data.val, device, to);
    train::LoopOptions lo;
    lo.local_batch_size = cfg.batch_size;
    lo.validation_batch_size = cfg.val_batch_size;
    lo.max_epochs = cfg.epochs;
    lo.warmup_epochs = cfg.warmup_epochs;
    lo.time_budget_s = cfg.time_budget_s;
    const double lr = cfg.learning_rate, wd = cfg.weight_decay;
    lo.make_optimizer =
        [lr, wd](const std::vector<at::Tensor>& p) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<train::FusedAdam>(p, torch::optim::AdamOptions(lr).weight_decay(wd));
    };
    // StepLR or CosineAnnealingLR stepped once per epoch (warm-up epochs included), as the
    // paper's loop and operator_learning's train() (scheduler.step() after the epoch's steps).
    lo.lr_after = lr_after;
    lo.checkpoint_interval = cfg.checkpoint_interval;
    lo.checkpoint_dir = run_dir / cfg.checkpoint_dir;
    lo.seed = static_cast<uint64_t>(cfg.seed);
    lo.loader_workers = cfg.dataloader_num_workers;
    lo.profiler = &profiler;
    train::LoopParallelism lp;
    if (ctx.comm.size() > 1) lp.world = dist::make_tensor_comm(ctx.comm, device);
    dist::run_agreed(ctx.comm, [&] {
      loop = std::make_unique<train::TrainingLoop>(*task, std::move(lo), device, ctx.comm, grid,
                                                   std::move(lp));
    });
    memory = measure_memory(*task, first_batch(*data.train, cfg.batch_size), device);
  });
  const double forward_flops = example_forward_flops(cfg, mo, data.grid);
  LOG_INFO(
      "model: FNO {}-D, modes {}, width {}, {} layers, {} parameters ({:.2f} MB), {:.4g} GFLOP per "
      "example "
      "forward ({}), {} (spectral part fp32), on {} with {} thread(s)",
      data.grid.size(), joined(mo.modes, "x"), cfg.width, cfg.layers, params,
      static_cast<double>(size_bytes) / kMiB, forward_flops / 1e9,
      recurrent(cfg) ? fmt::format("a rollout of {} one-step forwards", cfg.t_out)
                     : std::string("direct"),
      cfg.precision, device.str(), ctx.threads);
  LOG_INFO(
      "memory: persistent {:.2f} MB, peak forward {:.2f} MB, activations {:.2f} MB (one batch of "
      "{})",
      static_cast<double>(memory.persistent_bytes) / kMiB,
      static_cast<double>(memory.peak_forward_bytes) / kMiB,
      static_cast<double>(memory.activation_bytes) / kMiB, cfg.batch_size);
  const int64_t global_batch = static_cast<int64_t>(cfg.batch_size) * grid.replicas();
  if (ctx.comm.rank() == 0) {
    say(fmt::format(" -- grid shape : ({})", joined(data.grid, ", ")));
    say(fmt::format("Total number of model parameters: {}", params));
    say(fmt::format("Using DDP with {} GPUs and Input sharding with {} GPUs.", ctx.comm.size(),
                    cfg.tp_size));
    say(fmt::format("Using an effective DDP size: {}", grid.replicas()));
    say(fmt::format("Using GlobalBatchSize: {}", global_batch));
  }

  std::unique_ptr<core::Watchdog> watchdog =
      suite::progress_watchdog(ctx.comm, cfg.progress_timeout_s);
  loop->set_watchdog(&*watchdog);
  cli::EnergyMeter energy(ctx.comm);
  phases.set_energy_meter(&energy);

  train::TrainCounters start;
  if (!args.run_dir.empty()) start = loop->resume(run_dir / cfg.checkpoint_dir);
  std::vector<EpochRow> rows;
  const fs::path stats_file = run_dir / kEpochStatsFileName;
  if (ctx.comm.rank() == 0 && !args.run_dir.empty() && fs::exists(stats_file))
    for (const EpochRow& r : read_epoch_stats(stats_file))
      if (r.epoch <= start.epoch) rows.push_back(r);
  const auto write_rows = [&] {
    std::string text = epoch_stats_header() + "\n";
    for (const EpochRow& r : rows) text += epoch_stats_line(r) + "\n";
    core::write_file_atomic(stats_file, text);
  };

  // The loop writes an epoch's checkpoints after its callback: their time goes into that epoch's
  // row at the next callback (or after the last epoch), and the file is written again.
  double checkpoint_s_seen = loop->checkpoint_seconds();
  const auto add_checkpoint_time = [&] {
    const double now = loop->checkpoint_seconds();
    if (!rows.empty()) rows.back().checkpoint_s += now - checkpoint_s_seen;
    checkpoint_s_seen = now;
  };
  DistFftStats comm_before = dist_fft_stats();
  double timed_comm_s = 0.0;
  int64_t timed_comm_bytes = 0;
  setup_guard.reset();  // training starts: the folder stays whatever happens now
  const train::LoopResult result = phases.run("training", [&] {
    return loop->run([&](const train::LoopEpoch& e) {
      core::Stopwatch monitor;  // CARAML's monitoring: reporting the epoch
      add_checkpoint_time();
      log_epoch(e, cfg, data.shape.timesteps_per_example);
      energy.add_window(e.warmup ? "warmup" : "train", e.epoch, e.start_mono_s,
                        e.validation_start_mono_s);
      if (!e.warmup)
        energy.add_window("validation", e.epoch, e.validation_start_mono_s, e.end_mono_s);
      const DistFftStats now = dist_fft_stats();
      if (!e.warmup) {
        timed_comm_s += now.seconds - comm_before.seconds;
        timed_comm_bytes += now.bytes_sent - comm_before.bytes_sent;
      }
      if (ctx.comm.rank() == 0) {
        // operator_learning's per-epoch lines: its eager "compile" time is the training pass;
        // TFLOPs "per epoch" is its rate, the training FLOPs of this rank's batches (forward and
        // backward, 3 forwards) over the training pass, / 1e12.
        const double rank_examples = e.train.samples / static_cast<double>(ctx.comm.size());
        say(fmt::format("Eager train time (epoch {}): {:.4f}s", e.epoch, e.train_s));
        say(fmt::format("Train Epoch {} time [min]: {}", e.epoch,
                        core::python_float_str(e.train_s / 60.0)));
        say(fmt::format("CUDA Memory for Fwd Pass - Allocated per Epoch: {:.2f} MB",
                        static_cast<double>(memory.peak_forward_bytes) / kMiB));
        say(fmt::format("CUDA Memory for Bwd Pass - Allocated per Epoch: {:.2f} MB",
                        static_cast<double>(memory.persistent_bytes) / kMiB));
        say(fmt::format("Estimate Activations Memory per Epoch: {:.2f} MB",
                        static_cast<double>(memory.activation_bytes) / kMiB));
        say(fmt::format(
            "Total TFLOPs per epoch = {}",
            core::python_float_str(
                e.train_s > 0 ? 3.0 * forward_flops * rank_examples / e.train_s / 1e12 : 0.0)));
        EpochRow r;
        r.epoch = e.epoch;
        r.warmup = e.warmup;
        const auto& v = e.metrics.values;
        r.train_rel_l2 = v[0].second;
        r.val_rel_l2 = v[1].second;
        r.val_mse = v[2].second;
        r.lr = lr_after(e.epoch - 1);  // the optimizer already holds the next epoch's
        r.duration_s = e.duration_s;
        r.train_s = e.train_s;
        r.validation_s = e.validation_s;
        r.train_samples = static_cast<int64_t>(std::llround(e.train.samples));
        r.val_samples = static_cast<int64_t>(std::llround(e.val.samples));
        r.median_step_s = e.median_step_s;
        r.monitor_s = monitor.elapsed_s();  // the file write below is not in it
        rows.push_back(r);
        write_rows();
      }
      comm_before = dist_fft_stats();  // this callback's own time is not the transforms'
    });
  });
  if (ctx.comm.rank() == 0) {
    add_checkpoint_time();
    if (!rows.empty()) write_rows();
  }
  loop->set_watchdog(nullptr);
  watchdog.reset();
  phases.set_energy_meter(nullptr);
  const auto energy_rows = energy.finish(run_dir, start.epoch + 1);
  profiler.finish();

  if (ctx.comm.rank() != 0) return result.stopped ? suite::kExitStoppedBySignal : 0;
  report::RunRecord rec = fno_record(ctx, run_dir, device, cfg, args, grid, phases);
  rec.global_batch = global_batch;
  rec.local_batch = cfg.batch_size;
  rec.warmup_epochs = cfg.warmup_epochs;
  const bool any_timed =
      std::any_of(rows.begin(), rows.end(), [](const EpochRow& r) { return !r.warmup; });
  if (!any_timed) {
    // Stopped before the first timed epoch ended: nothing to report but the reason.
    LOG_WARN("stopped by {} before any timed epoch finished: no figures; {} resumes the run",
             suite::signal_name(result.stop_signal), (run_dir / "restart.sh").string());
    rec.status = report::kStatusTimeLimit;
    report::write_summary_json(run_dir, rec);
    return suite::kExitStoppedBySignal;
  }
  std::optional<double> wh;
  if (energy.active()) {
    double sum = 0.0;
    for (const auto& w : energy_rows)
      if (w.window == "train" || w.window == "validation") sum += w.energy_wh;
    wh = sum;
  }
  const FnoFigures f = fno_figures(rows, data.shape.timesteps_per_example, forward_flops, wh);
  rec.status = result.stopped ? report::kStatusTimeLimit : report::kStatusCompleted;
  rec.epochs = f.timed_epochs;
  rec.time_s = f.total_epoch_time_s;
  rec.energy_wh = wh;
  rec.params.push_back({"val_batch_size", std::to_string(cfg.val_batch_size)});
  rec.params.push_back({"viscosity", core::python_float_str(data.viscosity)});
  rec.params.push_back({"dataset", data.root.filename().string()});
  rec.counters = {
      {kCounterParameters, static_cast<double>(params), "",
       "trainable parameters (complex weights count 2)"},
      {kCounterModelSizeMb, static_cast<double>(size_bytes) / kMiB, "MB",
       "parameters and buffers, 2^20 bytes"},
      {kCounterTrainTimePerEpochMin, f.train_time_per_epoch_min, "min",
       "TotalTrainTime / timed epochs"},
      {kCounterMeanCompileTimeS, f.mean_compile_time_s, "s",
       "operator_learning's eager MeanCompileTime: mean training pass of the epochs after the "
       "first"},
      {kCounterTotalEpochTimeS, f.total_epoch_time_s, "s",
       "timed epochs: training, validation, LR step, reporting and checkpoints"},
      {kCounterTotalTrainTimeS, f.total_train_time_s, "s", "timed epochs' training passes"},
      {kCounterTotalComputeTimeS, f.total_compute_time_s, "s",
       "timed epochs' training + validation passes"},
      {kCounterTotalMonitorTimeS, f.total_monitor_time_s, "s",
       "reporting the timed epochs (log, energy, CSV)"},
      {kCounterTotalCheckpointTimeS, f.total_checkpoint_time_s, "s",
       "writing the timed epochs' checkpoints (rank 0)"},
      {kCounterTimesteps, f.timesteps, "",
       "(training + validation examples) x timesteps per example, timed epochs"},
      {kCounterTimestepsPerS, f.timesteps_per_s, "timesteps/s", "Timesteps / TotalComputeTime"},
      {kCounterTrainTimesteps, f.train_timesteps, "",
       "training examples x timesteps per example, timed epochs"},
      {kCounterTrainTimestepsPerS, f.train_timesteps_per_s, "timesteps/s",
       "TrainTimesteps / TotalTrainTime"},
      {kCounterPeakFwdMemMb, static_cast<double>(memory.peak_forward_bytes) / kMiB, "MB",
       "persistent + one training batch + the peak during its forward (rank 0)"},
      {kCounterPersistentMemMb, static_cast<double>(memory.persistent_bytes) / kMiB, "MB",
       "parameters, gradients, Adam's moments, buffers"},
      {kCounterActivationMemMb, static_cast<double>(memory.activation_bytes) / kMiB, "MB",
       "kept by one training forward for its backward (rank 0)"},
      {kCounterTflopPerEpoch, f.tflop_per_epoch, "TFLOP",
       "(3 x training + validation examples) x forward FLOPs, per epoch"},
      {kCounterValRelL2, f.val_rel_l2, "",
       "mean relative L2 error on the held-out examples, last epoch"},
      {"train_rel_l2", f.train_rel_l2, "",
       "mean relative L2 error of the last epoch's training steps"},
      {"forward_flop_per_example", forward_flops, "FLOP",
       "fno_forward_flops (docs/reports.md), times t_out for a recurrent rollout"},
      {"achieved_flop_per_s", f.achieved_flop_per_s, "FLOP/s",
       "the epochs' model FLOPs / TotalComputeTime"},
      {"median_step_s", core::median(result.step_times_s), "s",
       "median timed training step on rank 0"},
      {"dist_fft_comm_s", timed_comm_s, "s",
       "rank 0's time in the sharded transforms' collectives, timed epochs"},
      {"dist_fft_comm_share", f.total_epoch_time_s > 0 ? timed_comm_s / f.total_epoch_time_s : 0.0,
       "", "dist_fft_comm_s / TotalEpochTime"},
      {"dist_fft_bytes", static_cast<double>(timed_comm_bytes), "bytes",
       "rank 0's bytes sent by those collectives"}};
  if (f.timesteps_per_wh)
    rec.counters.push_back(
        {kCounterTimestepsPerWh, *f.timesteps_per_wh, "timesteps/Wh", "Timesteps / timed energy"});
  report::write_summary_json(run_dir, rec);

  LOG_INFO("fno: {} timed epochs after {} warm-up epoch(s); val_rel_l2 {:.5f} (train {:.5f})",
           f.timed_epochs, cfg.warmup_epochs, f.val_rel_l2, f.train_rel_l2);
  LOG_INFO(
      "TotalEpochTime {:.3f} s, TotalTrainTime {:.3f} s, TotalComputeTime {:.3f} s, "
      "TotalMonitorTime {:.3f} s, "
      "TotalCheckpointTime {:.3f} s, TrainTime/Epoch {:.4f} min",
      f.total_epoch_time_s, f.total_train_time_s, f.total_compute_time_s, f.total_monitor_time_s,
      f.total_checkpoint_time_s, f.train_time_per_epoch_min);
  LOG_INFO(
      "TrainTimesteps {:.0f}, TrainTimesteps/s {:.2f}; Timesteps {:.0f}; {:.4g} TFLOP per epoch, "
      "{:.4g} GFLOP/s",
      f.train_timesteps, f.train_timesteps_per_s, f.timesteps, f.tflop_per_epoch,
      f.achieved_flop_per_s / 1e9);
  if (cfg.tp_size > 1)
    LOG_INFO(
        "sharded transforms: {:.3f} s in collectives on rank 0 ({:.1f}% of the timed epochs), "
        "{:.3g} MB sent",
        timed_comm_s, 100.0 * timed_comm_s / std::max(f.total_epoch_time_s, 1e-12),
        timed_comm_bytes / 1e6);
  if (f.timesteps_per_wh)
    LOG_INFO("energy of the timed epochs: {:.4g} Wh, {:.4g} timesteps/Wh", *wh,
             *f.timesteps_per_wh);
  LOG_INFO("peak memory: process RSS {:.2f} GiB; phase wall times: {}",
           static_cast<double>(core::peak_rss_bytes()) / (1 << 30), phases.summary());
  if (result.stopped)
    LOG_WARN(
        "stopped by {} after epoch {}: the files are complete up to that epoch; {} resumes the run",
        suite::signal_name(result.stop_signal), result.last_epoch,
        (run_dir / "restart.sh").string());
  // The headline, last.
  LOG_INFO("Timesteps/s: {:.2f}", f.timesteps_per_s);
  // operator_learning's benchmark summary: round(x, 3) for times, int() for the rates.
  say("\n=== Benchmark Summary ===");
  say(fmt::format("NumEpochs: {}", f.timed_epochs));
  say(fmt::format("TotalEpochTime (s): {}", round3(f.total_epoch_time_s)));
  say(fmt::format("TotalMonitorTime (s): {}", round3(f.total_monitor_time_s)));
  say(fmt::format("TotalCheckpointTime (s): {}", round3(f.total_checkpoint_time_s)));
  say(fmt::format("TotalComputeTime (s): {}", round3(f.total_compute_time_s)));
  say(fmt::format("TotalTrainTime (s): {}", round3(f.total_train_time_s)));
  say(fmt::format("MeanCompileTime (s): {}", round3(f.mean_compile_time_s)));
  say(fmt::format("TotalTrainTimesteps: {}", std::llround(f.train_timesteps)));
  say(fmt::format("TotalTimesteps: {}", std::llround(f.timesteps)));
  say(fmt::format("TrainTimesteps/s: {}", static_cast<int64_t>(f.train_timesteps_per_s)));
  say(fmt::format("Timesteps/s: {}", static_cast<int64_t>(f.timesteps_per_s)));
  say("==========================\n");
  return result.stopped ? suite::kExitStoppedBySignal : 0;
}

// CARAML's `eval`: timed inference on a fixed input shape (random fields), no data, no training.
int run_eval(cli::RunContext& ctx, const Args& args, const FnoConfig& cfg,
             suite::PhaseDriver& phases) {
  const train::DeviceChoice device_choice =
      train::select_device(cfg.device, cfg.device_sharing, ctx.comm);
  const c10::Device device = device_choice.device;
  Layout layout = make_layout(ctx.comm, cfg, device);
  const dist::ProcessGrid& grid = *layout.grid;
  check_memory(ctx.comm, cfg, device);
  if (!args.run_dir.empty())
    throw core::UsageError("--run-dir/--restart: eval mode has nothing to resume");
  const fs::path run_dir = suite::prepare_run_folder(ctx.comm, folder_request(cfg, args));
  std::optional<suite::SetupGuard> setup_guard(std::in_place, ctx.comm, run_dir,
                                               !args.run_dir.empty());
  LOG_INFO("fno eval: run folder {}", run_dir.string());
  {
    report::SystemInfo info;
    info.gpu_model = train::device_model_name(device);
    info.device = device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx.threads;
    suite::write_run_context(ctx.comm, run_dir, info);
  }
  const ProblemShape shape = problem_shape(cfg);
  const FnoOptions mo = model_options(cfg, shape);
  std::vector<int64_t> grid_points(cfg.grid.begin(), cfg.grid.end());
  std::vector<int64_t> input_shape{cfg.eval_batch_size, shape.in_channels};
  input_shape.insert(input_shape.end(), grid_points.begin(), grid_points.end());
  std::unique_ptr<FnoTask> task;
  at::Tensor input;
  int64_t params = 0, size_bytes = 0;
  // Unused sources: the task needs two, eval reads neither.
  struct NoExamples : dataset::ExampleSource {
    std::size_t size() const override { return 0; }
    dataset::Example get(std::size_t, uint64_t) const override {
      throw core::Error("eval mode reads no examples");
    }
  } none;
  phases.run("init_model", [&] {
    torch::manual_seed(static_cast<uint64_t>(cfg.seed));
    Fno net(mo);
    params = count_parameters(*net);
    size_bytes = model_bytes(*net);
    net->to(device);
    net->eval();
    task =
        std::make_unique<FnoTask>(net, none, none, device, task_options(cfg, shape, layout.shard));
    input = at::randn(input_shape,
                      at::TensorOptions().device(device));  // the same on every rank (seeded)
  });
  const double forward_flops = example_forward_flops(cfg, mo, grid_points);
  LOG_INFO("model: FNO {}-D, modes {}, width {}, {} layers, {} parameters; input [{}], {}, on {}",
           grid_points.size(), joined(mo.modes, "x"), cfg.width, cfg.layers, params,
           joined(input_shape, ", "), cfg.precision, device.str());
  cli::EnergyMeter energy(ctx.comm);
  phases.set_energy_meter(&energy);
  std::vector<double> times_s;
  double window_start = 0.0, window_end = 0.0;
  setup_guard.reset();  // training starts: the folder stays whatever happens now
  phases.run("eval", [&] {
    c10::InferenceMode no_grad;
    const auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
    };
    for (int i = 0; i < cfg.eval_warmup; ++i) (void)task->predict(input);
    sync();
    ctx.comm.barrier();
    window_start = core::monotonic_s();
    for (int i = 0; i < cfg.eval_iterations; ++i) {
      core::Stopwatch clock;
      (void)task->predict(input);
      sync();
      times_s.push_back(clock.elapsed_s());
    }
    ctx.comm.barrier();
    window_end = core::monotonic_s();
  });
  energy.add_window("eval", 1, window_start, window_end);
  phases.set_energy_meter(nullptr);
  const auto energy_rows = energy.finish(run_dir, 1);
  if (ctx.comm.rank() != 0) return 0;

  const double total_s = window_end - window_start;
  const double examples =
      static_cast<double>(cfg.eval_batch_size) * cfg.eval_iterations * grid.replicas();
  const double timesteps = examples * static_cast<double>(shape.timesteps_per_example);
  report::RunRecord rec = fno_record(ctx, run_dir, device, cfg, args, grid, phases);
  rec.status = report::kStatusCompleted;
  rec.global_batch = static_cast<int64_t>(cfg.eval_batch_size) * grid.replicas();
  rec.local_batch = cfg.eval_batch_size;
  rec.time_s = total_s;
  std::optional<double> wh;
  if (energy.active()) {
    double sum = 0.0;
    for (const auto& w : energy_rows) sum += w.energy_wh;
    wh = sum;
  }
  rec.energy_wh = wh;
  rec.params.push_back({kParamInputShape, "[" + joined(input_shape, ", ") + "]"});
  rec.counters = {
      {kCounterParameters, static_cast<double>(params), "",
       "trainable parameters (complex weights count 2)"},
      {kCounterModelSizeMb, static_cast<double>(size_bytes) / kMiB, "MB",
       "parameters and buffers, 2^20 bytes"},
      {"eval_forward_s", core::median(times_s), "s",
       "median timed forward of one input batch (rank 0)"},
      {"eval_forward_s_mean", total_s / cfg.eval_iterations, "s", "timed window / iterations"},
      {kCounterTimesteps, timesteps, "",
       "examples x timesteps per example in the timed forwards, all replicas"},
      {kCounterTimestepsPerS, total_s > 0 ? timesteps / total_s : 0.0, "timesteps/s",
       "Timesteps / timed window"},
      {"examples_per_s", total_s > 0 ? examples / total_s : 0.0, "examples/s", "all replicas"},
      {kCounterEvalTflop, examples * forward_flops / 1e12, "TFLOP",
       "forward FLOPs of the timed forwards"}};
  if (wh && *wh > 0)
    rec.counters.push_back(
        {kCounterTimestepsPerWh, timesteps / *wh, "timesteps/Wh", "Timesteps / energy"});
  report::write_summary_json(run_dir, rec);
  LOG_INFO("eval: {} forwards of [{}] in {:.3f} s: median {:.2f} ms, {:.1f} examples/s",
           cfg.eval_iterations, joined(input_shape, ", "), total_s, core::median(times_s) * 1e3,
           total_s > 0 ? examples / total_s : 0.0);
  LOG_INFO("Timesteps/s: {:.2f}", total_s > 0 ? timesteps / total_s : 0.0);
  return 0;
}

int run(cli::RunContext& ctx, const Args& args) {
  at::set_num_threads(ctx.threads);
  const profile::ProfileOptions profile_options = profile::profile_options_from_env();
  profile::Profiler profiler(profile::profiles_this_rank(profile_options, ctx.comm.local_rank()),
                             profile_options.schedule);
  suite::PhaseDriver phases(&profiler);
  suite::install_stop_signals(ctx.stop_signals);
  const FnoConfig cfg = cli::load_config_everywhere_as<FnoConfig>(ctx.comm, args.config);
  if (cfg.mode == "eval") return run_eval(ctx, args, cfg, phases);
  return run_train(ctx, args, cfg, phases, profiler);
}

}  // namespace

cli::Subcommand add_fno(CLI::App& app, int argc, char** argv) {
  return cli::add_workload_subcommand<FnoConfig>(
      app, "fno",
      "CARAML's operator benchmark: a Fourier neural operator trained on PDE data (or timed "
      "in inference), timesteps/s, memory, energy",
      argc, argv, run);
}

}  // namespace scaffold::fno
