// `scaffold fno`: CARAML's operator benchmark with a Fourier neural operator, as the hooks of the
// suite's driver (suite/driver.hpp). train: layout (shard groups x replicas) -> data (generated in
// situ or reused) -> init_model (FNO, task, loop, one measured forward for the memory figures) ->
// training (warm-up epochs first, excluded by name) -> report (epoch_stats.csv, summary.json,
// CARAML's figures). eval (CARAML's `eval`): layout -> init_model -> eval (timed inference on a
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

#include "config/load.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/fused_adam.hpp"
#include "report/epoch_log.hpp"
#include "report/run_record.hpp"
#include "suite/driver.hpp"
#include "train/device.hpp"
#include "train/device_memory.hpp"
#include "train/loop.hpp"
#include "workloads/fno/dist_fft.hpp"
#include "workloads/fno/fno.hpp"
#include "workloads/fno/memory.hpp"
#include "workloads/fno/memory_estimate.hpp"
#include "workloads/fno/metrics.hpp"
#include "workloads/fno/options.hpp"
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

// spectral_transform for the run's device: auto is the probe on a CPU and the FFTs elsewhere; the
// probe and the DFT products are CPU-only choices (a probe times on the host clock).
SpectralConvOptions::Transform spectral_transform(const std::string& key, c10::Device device) {
  using Transform = SpectralConvOptions::Transform;
  if (key == "fft") return Transform::Fft;
  if (key == "auto") return device.is_cpu() ? Transform::Probe : Transform::Fft;
  if (!device.is_cpu())
    throw core::Error(fmt::format(
        "spectral_transform: {} runs on the CPU, this run trains on {}; use auto or fft", key,
        device.str()));
  if (key == "dft") return Transform::Dft;
  if (key == "probe") return Transform::Probe;
  throw core::Error(
      fmt::format("spectral_transform: {}: expected one of auto, probe, dft, fft", key));
}

FnoOptions model_options(const FnoConfig& cfg, const ProblemShape& shape, c10::Device device) {
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
  o.real_mode_mixing = cfg.spectral_mixing == "real";
  o.spectral_transform = spectral_transform(cfg.spectral_transform, device);
  o.fused_projection = cfg.fused_projection;
  o.fused_pointwise = cfg.fused_pointwise;
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
  std::unique_ptr<dist::ParallelLayout> parallel;  // shard groups x replicas (tp_size > 1)
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
    l.parallel = std::make_unique<dist::ParallelLayout>(comm, cfg.tp_size);
    l.shard = std::make_shared<FftShard>();
    l.shard->group = dist::make_tensor_comm(l.parallel->group(), device);
    l.shard->extent = cfg.grid[0];
  }
  return l;
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
data::Batch first_batch(const data::ExampleSource& source, int64_t n) {
  std::vector<std::vector<at::Tensor>> fields;
  data::Batch b;
  for (int64_t i = 0; i < n; ++i) {
    data::Example e = source.get(static_cast<std::size_t>(i), 0);
    if (fields.empty()) fields.resize(e.fields.size());
    for (std::size_t f = 0; f < e.fields.size(); ++f) fields[f].push_back(e.fields[f]);
    b.ids.push_back(e.id);
  }
  for (auto& f : fields) b.fields.push_back(at::stack(f));
  return b;
}

// What the train and eval runs share: the layout, the memory check and the record's fields.
class FnoRun : public suite::WorkloadRun {
 public:
  FnoRun(const FnoConfig& cfg, const Args& args)
      : cfg_(cfg), config_file_(args.config.files.front()) {}

  void layout(suite::RunEnv& env) override { layout_ = make_layout(env.comm, cfg_, env.device); }
  // The configuration's lower-bound memory (memory_estimate.hpp), before any data is generated.
  core::MemoryEstimate memory_estimate(const suite::RunEnv&) const override {
    const ProblemShape shape = problem_shape(cfg_);
    return fno_memory_estimate(cfg_, shape.in_channels, shape.out_channels);
  }
  // system.json names the spectral mode mixing, the transforms, the projection and the Fourier
  // layers' pointwise branches the model runs.
  void describe(suite::RunEnv& env, report::SystemInfo& info) override {
    info.kernels.push_back("spectral_mixing=" + cfg_.spectral_mixing);
    const FnoOptions o = model_options(cfg_, problem_shape(cfg_), env.device);
    info.kernels.push_back(std::string("spectral_transform=") + to_string(o.spectral_transform));
    const bool on_cpu = !env.device.is_cuda(), autocast = cfg_.precision == "bf16";
    info.kernels.push_back(std::string("projection=") +
                           (projection_is_fused(o, on_cpu, autocast) ? "fused" : "libtorch"));
    info.kernels.push_back(std::string("pointwise=") +
                           (pointwise_is_fused(o, on_cpu, autocast) ? "fused" : "libtorch"));
  }

 protected:
  const dist::ProcessGrid& grid() const { return *layout_.grid; }
  // The fields common to the train and eval records.
  void fill_record(report::RunRecord& rec) const {
    rec.precision = cfg_.precision;
    std::vector<int64_t> grid_points(cfg_.grid.begin(), cfg_.grid.end());
    rec.params = {{kParamProblem, cfg_.problem},
                  {kParamConfig, fs::path(config_file_).filename().string()},
                  {kParamGrid, joined(grid_points, "x")},
                  {kParamDataParallel, std::to_string(grid().replicas())},
                  {kParamGridShards, std::to_string(cfg_.tp_size)},
                  {kParamMode, cfg_.mode},
                  {"modes", joined(modes_of(cfg_), "x")},
                  {"width", std::to_string(cfg_.width)},
                  {"layers", std::to_string(cfg_.layers)},
                  {"t_in", std::to_string(cfg_.t_in)},
                  {"t_out", std::to_string(cfg_.t_out)},
                  {"time_stepping", cfg_.time_stepping},
                  {"target", cfg_.target},
                  {"bias", cfg_.bias ? "1" : "0"},
                  {"lr_scheduler", cfg_.lr_scheduler},
                  {"loss", cfg_.loss},
                  {"optimizer", "Adam"}};
  }

  FnoConfig cfg_;
  std::string config_file_;
  Layout layout_;
  int64_t params_ = 0, size_bytes_ = 0;
};

// Training: data generated in situ (or reused), the loop, operator_learning's lines and figures.
class FnoTrainRun : public FnoRun {
 public:
  using FnoRun::FnoRun;

  // data: generated in situ into the cache (or reused from it), on every rank's threads.
  void prepare_data(suite::RunEnv& env) override {
    data_ = make_fno_data(cfg_, env.comm, env.threads);
    dist::run_agreed(env.comm, [&] {
      const data::Example e = data_.train->get(0, 0);
      const auto expect = [&](const at::Tensor& t, int64_t channels, const char* what) {
        std::vector<int64_t> shape{channels};
        shape.insert(shape.end(), data_.grid.begin(), data_.grid.end());
        if (t.sizes() != shape)
          throw core::Error(fmt::format("problem {}: the {} field of example {} is {}, expected {}",
                                        cfg_.problem, what, e.id, c10::str(t.sizes()),
                                        c10::str(at::IntArrayRef(shape))));
      };
      expect(e.fields.at(0), data_.shape.in_channels, "input");
      expect(e.fields.at(1), data_.shape.out_channels, "target");
    });
    if (data_.reused)
      LOG_INFO("data: reused {} ({:.2f} s)", data_.root.string(), data_.generate_s);
    else
      LOG_INFO("data: generated {} ({} samples, {} solver steps in {:.2f} s)", data_.root.string(),
               data_.samples_generated, data_.solver_steps, data_.generate_s);
    LOG_INFO(
        "data: {} on a {} grid ({} training, {} validation examples; {} -> {} channels, {} "
        "timestep(s) each), batch {} x {} replica(s), tp_size {}",
        data_.problem, joined(data_.grid, "x"), data_.train->size(), data_.val->size(),
        data_.shape.in_channels, data_.shape.out_channels, data_.shape.timesteps_per_example,
        cfg_.batch_size, grid().replicas(), cfg_.tp_size);
  }

  void build(suite::RunEnv& env) override {
    mo_ = model_options(cfg_, data_.shape, env.device);
    torch::manual_seed(
        static_cast<uint64_t>(cfg_.seed));  // identical initial weights (rank 0's broadcast too)
    Fno net(mo_);
    params_ = count_parameters(*net);
    size_bytes_ = model_bytes(*net);
    FnoTaskOptions to = task_options(cfg_, data_.shape, layout_.shard);
    to.profiler = &env.profiler;
    task_ = std::make_unique<FnoTask>(net, *data_.train, *data_.val, env.device, to);
    train::LoopOptions lo;
    lo.local_batch_size = cfg_.batch_size;
    lo.validation_batch_size = cfg_.val_batch_size;
    lo.max_epochs = cfg_.epochs;
    lo.warmup_epochs = cfg_.warmup_epochs;
    lo.time_budget_s = cfg_.time_budget_s;
    const double lr = cfg_.learning_rate, wd = cfg_.weight_decay;
    lo.make_optimizer =
        [lr, wd](const std::vector<at::Tensor>& p) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<kernels::FusedAdam>(p,
                                                  torch::optim::AdamOptions(lr).weight_decay(wd));
    };
    // StepLR or CosineAnnealingLR stepped once per epoch (warm-up epochs included), as the
    // paper's loop and operator_learning's train() (scheduler.step() after the epoch's steps).
    lo.lr_after = [this](int64_t done) { return lr_after(done); };
    lo.checkpoint_interval = cfg_.checkpoint_interval;
    lo.checkpoint_dir = env.run_dir / cfg_.checkpoint_dir;
    lo.seed = static_cast<uint64_t>(cfg_.seed);
    lo.loader_workers = cfg_.dataloader_num_workers;
    lo.profiler = &env.profiler;
    train::LoopParallelism lp;
    if (env.comm.size() > 1) lp.world = dist::make_tensor_comm(env.comm, env.device);
    dist::run_agreed(env.comm, [&] {
      loop_ = std::make_unique<train::TrainingLoop>(*task_, std::move(lo), env.device, env.comm,
                                                    grid(), std::move(lp));
    });
    memory_ = measure_memory(*task_, first_batch(*data_.train, cfg_.batch_size), env.device);
    log_ = std::make_unique<report::EpochLog<EpochRow>>(env.run_dir / kEpochStatsFileName,
                                                        epoch_stats_columns());
  }

  void after_build(suite::RunEnv& env) override {
    forward_flops_ = example_forward_flops(cfg_, mo_, data_.grid);
    LOG_INFO(
        "model: FNO {}-D, modes {}, width {}, {} layers, {} parameters ({:.2f} MB), {:.4g} GFLOP "
        "per example forward ({}), {} (spectral part fp32), on {} with {} thread(s)",
        data_.grid.size(), joined(mo_.modes, "x"), cfg_.width, cfg_.layers, params_,
        static_cast<double>(size_bytes_) / kMiB, forward_flops_ / 1e9,
        recurrent(cfg_) ? fmt::format("a rollout of {} one-step forwards", cfg_.t_out)
                        : std::string("direct"),
        cfg_.precision, env.device.str(), env.threads);
    LOG_INFO(
        "memory: persistent {:.2f} MB, peak forward {:.2f} MB, activations {:.2f} MB (one batch "
        "of {})",
        static_cast<double>(memory_.persistent_bytes) / kMiB,
        static_cast<double>(memory_.peak_forward_bytes) / kMiB,
        static_cast<double>(memory_.activation_bytes) / kMiB, cfg_.batch_size);
    if (env.comm.rank() == 0) {
      say(fmt::format(" -- grid shape : ({})", joined(data_.grid, ", ")));
      say(fmt::format("Total number of model parameters: {}", params_));
      say(fmt::format("Using DDP with {} GPUs and Input sharding with {} GPUs.", env.comm.size(),
                      cfg_.tp_size));
      say(fmt::format("Using an effective DDP size: {}", grid().replicas()));
      say(fmt::format("Using GlobalBatchSize: {}", global_batch()));
    }
  }

  train::TrainingLoop* loop() override { return loop_.get(); }

  void resume_rows(suite::RunEnv&, const train::TrainCounters& start) override {
    log_->resume([&](const EpochRow& r) { return r.epoch <= start.epoch; });
  }

  void before_training(suite::RunEnv&) override {
    checkpoint_s_seen_ = loop_->checkpoint_seconds();
    comm_before_ = dist_fft_stats();
  }

  void on_epoch(suite::RunEnv& env, const train::LoopEpoch& e) override {
    core::Stopwatch monitor;  // CARAML's monitoring: reporting the epoch
    add_checkpoint_time();
    log_epoch(e, cfg_, data_.shape.timesteps_per_example);
    const DistFftStats now = dist_fft_stats();
    if (!e.warmup) {
      timed_comm_s_ += now.seconds - comm_before_.seconds;
      timed_comm_bytes_ += now.bytes_sent - comm_before_.bytes_sent;
    }
    if (env.comm.rank() == 0) {
      // operator_learning's per-epoch lines: its eager "compile" time is the training pass;
      // TFLOPs "per epoch" is its rate, the training FLOPs of this rank's batches (forward and
      // backward, 3 forwards) over the training pass, / 1e12.
      const double rank_examples = e.train.samples / static_cast<double>(env.comm.size());
      say(fmt::format("Eager train time (epoch {}): {:.4f}s", e.epoch, e.train_s));
      say(fmt::format("Train Epoch {} time [min]: {}", e.epoch,
                      core::python_float_str(e.train_s / 60.0)));
      say(fmt::format("CUDA Memory for Fwd Pass - Allocated per Epoch: {:.2f} MB",
                      static_cast<double>(memory_.peak_forward_bytes) / kMiB));
      say(fmt::format("CUDA Memory for Bwd Pass - Allocated per Epoch: {:.2f} MB",
                      static_cast<double>(memory_.persistent_bytes) / kMiB));
      say(fmt::format("Estimate Activations Memory per Epoch: {:.2f} MB",
                      static_cast<double>(memory_.activation_bytes) / kMiB));
      say(fmt::format(
          "Total TFLOPs per epoch = {}",
          core::python_float_str(
              e.train_s > 0 ? 3.0 * forward_flops_ * rank_examples / e.train_s / 1e12 : 0.0)));
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
      log_->append(r);
    }
    comm_before_ = dist_fft_stats();  // this callback's own time is not the transforms'
  }

  void after_training(suite::RunEnv& env, const train::LoopResult&) override {
    if (env.comm.rank() != 0) return;
    add_checkpoint_time();
    if (!log_->rows().empty()) log_->write();
  }

  bool finish(suite::RunEnv&, const train::LoopResult& result, const suite::EnergyResult& energy,
              report::RunRecord& rec) override;
  void closing_lines(suite::RunEnv& env, const train::LoopResult& result) override;

 private:
  int64_t global_batch() const { return static_cast<int64_t>(cfg_.batch_size) * grid().replicas(); }
  // The learning rate after `done` epochs, i.e. the one epoch done + 1 runs at.
  double lr_after(int64_t done) const { return scheduled_lr(lr_schedule(cfg_), done); }
  // The loop writes an epoch's checkpoints after its callback: their time goes into that epoch's
  // row at the next callback (or after the last epoch), and the file is written again.
  void add_checkpoint_time() {
    const double now = loop_->checkpoint_seconds();
    if (!log_->rows().empty()) log_->rows().back().checkpoint_s += now - checkpoint_s_seen_;
    checkpoint_s_seen_ = now;
  }

  FnoData data_;
  FnoOptions mo_;
  std::unique_ptr<FnoTask> task_;
  std::unique_ptr<train::TrainingLoop> loop_;
  std::unique_ptr<report::EpochLog<EpochRow>> log_;
  MemoryFigures memory_;
  double forward_flops_ = 0.0;
  double checkpoint_s_seen_ = 0.0;
  DistFftStats comm_before_;
  double timed_comm_s_ = 0.0;
  int64_t timed_comm_bytes_ = 0;
  FnoFigures f_;
};

bool FnoTrainRun::finish(suite::RunEnv&, const train::LoopResult& result,
                         const suite::EnergyResult& energy, report::RunRecord& rec) {
  fill_record(rec);
  rec.global_batch = global_batch();
  rec.local_batch = cfg_.batch_size;
  rec.warmup_epochs = cfg_.warmup_epochs;
  const auto& rows = log_->rows();
  if (std::none_of(rows.begin(), rows.end(), [](const EpochRow& r) { return !r.warmup; }))
    return false;
  const std::optional<double> wh = energy.sum_wh({"train", "validation"});
  f_ = fno_figures(rows, data_.shape.timesteps_per_example, forward_flops_, wh);
  const FnoFigures& f = f_;
  rec.epochs = f.timed_epochs;
  rec.time_s = f.total_epoch_time_s;
  rec.energy_wh = wh;
  rec.params.push_back({"val_batch_size", std::to_string(cfg_.val_batch_size)});
  rec.params.push_back({"viscosity", core::python_float_str(data_.viscosity)});
  rec.params.push_back({"dataset", data_.root.filename().string()});
  rec.counters = {
      {kCounterParameters, static_cast<double>(params_), "",
       "trainable parameters (complex weights count 2)"},
      {kCounterModelSizeMb, static_cast<double>(size_bytes_) / kMiB, "MB",
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
      {kCounterPeakFwdMemMb, static_cast<double>(memory_.peak_forward_bytes) / kMiB, "MB",
       "persistent + one training batch + the peak during its forward (rank 0)"},
      {kCounterPersistentMemMb, static_cast<double>(memory_.persistent_bytes) / kMiB, "MB",
       "parameters, gradients, Adam's moments, buffers"},
      {kCounterActivationMemMb, static_cast<double>(memory_.activation_bytes) / kMiB, "MB",
       "kept by one training forward for its backward (rank 0)"},
      {kCounterTflopPerEpoch, f.tflop_per_epoch, "TFLOP",
       "(3 x training + validation examples) x forward FLOPs, per epoch"},
      {kCounterValRelL2, f.val_rel_l2, "",
       "mean relative L2 error on the held-out examples, last epoch"},
      {"train_rel_l2", f.train_rel_l2, "",
       "mean relative L2 error of the last epoch's training steps"},
      {"forward_flop_per_example", forward_flops_, "FLOP",
       "fno_forward_flops (docs/reports.md), times t_out for a recurrent rollout"},
      {"achieved_flop_per_s", f.achieved_flop_per_s, "FLOP/s",
       "the epochs' model FLOPs / TotalComputeTime"},
      {"median_step_s", core::median(result.step_times_s), "s",
       "median timed training step on rank 0"},
      {"dist_fft_comm_s", timed_comm_s_, "s",
       "rank 0's time in the sharded transforms' collectives, timed epochs"},
      {"dist_fft_comm_share", f.total_epoch_time_s > 0 ? timed_comm_s_ / f.total_epoch_time_s : 0.0,
       "", "dist_fft_comm_s / TotalEpochTime"},
      {"dist_fft_bytes", static_cast<double>(timed_comm_bytes_), "bytes",
       "rank 0's bytes sent by those collectives"}};
  if (f.timesteps_per_wh)
    rec.counters.push_back(
        {kCounterTimestepsPerWh, *f.timesteps_per_wh, "timesteps/Wh", "Timesteps / timed energy"});

  LOG_INFO("fno: {} timed epochs after {} warm-up epoch(s); val_rel_l2 {:.5f} (train {:.5f})",
           f.timed_epochs, cfg_.warmup_epochs, f.val_rel_l2, f.train_rel_l2);
  LOG_INFO(
      "TotalEpochTime {:.3f} s, TotalTrainTime {:.3f} s, TotalComputeTime {:.3f} s, "
      "TotalMonitorTime {:.3f} s, TotalCheckpointTime {:.3f} s, TrainTime/Epoch {:.4f} min",
      f.total_epoch_time_s, f.total_train_time_s, f.total_compute_time_s, f.total_monitor_time_s,
      f.total_checkpoint_time_s, f.train_time_per_epoch_min);
  LOG_INFO(
      "TrainTimesteps {:.0f}, TrainTimesteps/s {:.2f}; Timesteps {:.0f}; {:.4g} TFLOP per epoch, "
      "{:.4g} GFLOP/s",
      f.train_timesteps, f.train_timesteps_per_s, f.timesteps, f.tflop_per_epoch,
      f.achieved_flop_per_s / 1e9);
  if (cfg_.tp_size > 1)
    LOG_INFO(
        "sharded transforms: {:.3f} s in collectives on rank 0 ({:.1f}% of the timed epochs), "
        "{:.3g} MB sent",
        timed_comm_s_, 100.0 * timed_comm_s_ / std::max(f.total_epoch_time_s, 1e-12),
        timed_comm_bytes_ / 1e6);
  if (f.timesteps_per_wh)
    LOG_INFO("energy of the timed epochs: {:.4g} Wh, {:.4g} timesteps/Wh", *wh,
             *f.timesteps_per_wh);
  return true;
}

void FnoTrainRun::closing_lines(suite::RunEnv&, const train::LoopResult&) {
  const FnoFigures& f = f_;
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
}

// CARAML's `eval`: timed inference on a fixed input shape (random fields), no data, no training.
class FnoEvalRun : public FnoRun {
 public:
  using FnoRun::FnoRun;

  void layout(suite::RunEnv& env) override {
    FnoRun::layout(env);
    if (env.resumed) throw core::UsageError("--run-dir/--restart: eval mode has nothing to resume");
  }
  bool has_data() const override { return false; }

  void build(suite::RunEnv& env) override {
    shape_ = problem_shape(cfg_);
    mo_ = model_options(cfg_, shape_, env.device);
    grid_points_.assign(cfg_.grid.begin(), cfg_.grid.end());
    input_shape_ = {cfg_.eval_batch_size, shape_.in_channels};
    input_shape_.insert(input_shape_.end(), grid_points_.begin(), grid_points_.end());
    torch::manual_seed(static_cast<uint64_t>(cfg_.seed));
    Fno net(mo_);
    params_ = count_parameters(*net);
    size_bytes_ = model_bytes(*net);
    net->to(env.device);
    net->eval();
    task_ = std::make_unique<FnoTask>(net, none_, none_, env.device,
                                      task_options(cfg_, shape_, layout_.shard));
    input_ = at::randn(input_shape_,
                       at::TensorOptions().device(env.device));  // the same on every rank (seeded)
  }

  void after_build(suite::RunEnv& env) override {
    forward_flops_ = example_forward_flops(cfg_, mo_, grid_points_);
    LOG_INFO("model: FNO {}-D, modes {}, width {}, {} layers, {} parameters; input [{}], {}, on {}",
             grid_points_.size(), joined(mo_.modes, "x"), cfg_.width, cfg_.layers, params_,
             joined(input_shape_, ", "), cfg_.precision, env.device.str());
  }

  train::TrainingLoop* loop() override { return nullptr; }
  void on_epoch(suite::RunEnv&, const train::LoopEpoch&) override {}

  train::LoopResult run_without_loop(suite::RunEnv& env, energy::EnergyMeter& energy) override {
    env.phases.run("eval", [&] {
      c10::InferenceMode no_grad;
      const auto sync = [&] {
        if (env.device.is_cuda()) torch::cuda::synchronize(env.device.index());
      };
      for (int i = 0; i < cfg_.eval_warmup; ++i) (void)task_->predict(input_);
      sync();
      env.comm.barrier();
      window_start_ = core::monotonic_s();
      for (int i = 0; i < cfg_.eval_iterations; ++i) {
        core::Stopwatch clock;
        (void)task_->predict(input_);
        sync();
        times_s_.push_back(clock.elapsed_s());
      }
      env.comm.barrier();
      window_end_ = core::monotonic_s();
    });
    energy.add_window("eval", 1, window_start_, window_end_);
    return {};
  }

  bool finish(suite::RunEnv&, const train::LoopResult&, const suite::EnergyResult& energy,
              report::RunRecord& rec) override {
    const double total_s = window_end_ - window_start_;
    const double examples =
        static_cast<double>(cfg_.eval_batch_size) * cfg_.eval_iterations * grid().replicas();
    const double timesteps = examples * static_cast<double>(shape_.timesteps_per_example);
    fill_record(rec);
    rec.global_batch = static_cast<int64_t>(cfg_.eval_batch_size) * grid().replicas();
    rec.local_batch = cfg_.eval_batch_size;
    rec.time_s = total_s;
    const std::optional<double> wh = energy.sum_wh({"eval"});
    rec.energy_wh = wh;
    rec.params.push_back({kParamInputShape, "[" + joined(input_shape_, ", ") + "]"});
    rec.counters = {
        {kCounterParameters, static_cast<double>(params_), "",
         "trainable parameters (complex weights count 2)"},
        {kCounterModelSizeMb, static_cast<double>(size_bytes_) / kMiB, "MB",
         "parameters and buffers, 2^20 bytes"},
        {"eval_forward_s", core::median(times_s_), "s",
         "median timed forward of one input batch (rank 0)"},
        {"eval_forward_s_mean", total_s / cfg_.eval_iterations, "s", "timed window / iterations"},
        {kCounterTimesteps, timesteps, "",
         "examples x timesteps per example in the timed forwards, all replicas"},
        {kCounterTimestepsPerS, total_s > 0 ? timesteps / total_s : 0.0, "timesteps/s",
         "Timesteps / timed window"},
        {"examples_per_s", total_s > 0 ? examples / total_s : 0.0, "examples/s", "all replicas"},
        {kCounterEvalTflop, examples * forward_flops_ / 1e12, "TFLOP",
         "forward FLOPs of the timed forwards"}};
    if (wh && *wh > 0)
      rec.counters.push_back(
          {kCounterTimestepsPerWh, timesteps / *wh, "timesteps/Wh", "Timesteps / energy"});
    LOG_INFO("eval: {} forwards of [{}] in {:.3f} s: median {:.2f} ms, {:.1f} examples/s",
             cfg_.eval_iterations, joined(input_shape_, ", "), total_s,
             core::median(times_s_) * 1e3, total_s > 0 ? examples / total_s : 0.0);
    LOG_INFO("Timesteps/s: {:.2f}", total_s > 0 ? timesteps / total_s : 0.0);
    return true;
  }

 private:
  // Unused sources: the task needs two, eval reads neither.
  struct NoExamples : data::ExampleSource {
    std::size_t size() const override { return 0; }
    data::Example get(std::size_t, uint64_t) const override {
      throw core::Error("eval mode reads no examples");
    }
  } none_;
  ProblemShape shape_;
  FnoOptions mo_;
  std::vector<int64_t> grid_points_, input_shape_;
  std::unique_ptr<FnoTask> task_;
  at::Tensor input_;
  double forward_flops_ = 0.0;
  std::vector<double> times_s_;
  double window_start_ = 0.0, window_end_ = 0.0;
};

std::unique_ptr<suite::WorkloadRun> start(const FnoConfig& cfg, const Args& args) {
  if (cfg.mode == "eval") return std::make_unique<FnoEvalRun>(cfg, args);
  return std::make_unique<FnoTrainRun>(cfg, args);
}

}  // namespace

suite::Workload fno_workload() {
  return suite::make_workload<FnoConfig>(
      kWorkloadName,
      "CARAML's operator benchmark: a Fourier neural operator trained on PDE data (or timed "
      "in inference), timesteps/s, memory, energy",
      start, result_table());
}

}  // namespace scaffold::fno
