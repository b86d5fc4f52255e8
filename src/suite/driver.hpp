// The one driver of every suite workload (docs/architecture.md, "The driver"), in the spirit of
// torchtitan's TrainSpec: a workload is a record (suite::Workload: its name, help and how it starts
// a run from its config) and a run of it is a WorkloadRun, whose hooks the driver calls in one
// fixed order:
//
//   init        threads, profiler, stop signals (--stop-signals), config (rank 0's, broadcast),
//               device, layout(), memory_estimate() checked, run folder, system.json (+describe())
//   data        prepare_data(), in phase data_phase() ("data"; none: the workload names its
//               own), unless has_data() is false
//   init_model  build() (phase "init_model"), then after_build()
//   training    watchdog, energy meter, warm_up(), resume (--run-dir) and resume_rows(),
//               before_training(), the loop with on_epoch() after the driver's energy windows
//               (phase "training"; a failure in it goes through explain_failure()); or
//               run_without_loop() for a run without a training loop (an inference benchmark)
//   report      after_training() on every rank; energy_stats.csv; on rank 0 system.json again
//               (+describe_after_training()), the record
//               (base_record, status, runtime) filled by finish(), summary.json, the peak-memory
//               and stop lines, then closing_lines()
//
// and returns the exit code (kExitStoppedBySignal after a stop). What differs between workloads
// lives in their hooks; everything above is written once, here.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_budget.hpp"
#include "core/timer.hpp"
#include "energy/meter.hpp"
#include "profile/profiler.hpp"
#include "report/record_table.hpp"
#include "report/run_record.hpp"
#include "report/system_info.hpp"
#include "suite/command_line.hpp"
#include "suite/phases.hpp"
#include "suite/run_folder.hpp"
#include "train/loop_result.hpp"

namespace scaffold::train {
class TrainingLoop;  // train/loop.hpp
}  // namespace scaffold::train

namespace scaffold::suite {

// The keys every workload's config has that the driver reads itself.
struct RunSettings {
  std::string device;           // "auto", "cpu", "cuda", "cuda:N"
  bool device_sharing = false;  // ranks may share one device
  int progress_timeout_s = 0;   // the watchdog (<= 0: none)
  std::string checkpoint_dir;   // under the run folder
  RunFolderRequest folder;      // run_folder_request of the config
};

// What the driver hands the hooks: the run's context, filled in as the run goes.
struct RunEnv {
  dist::Communicator& comm;
  int threads = 1;
  const cli::WorkloadArgs& args;
  bool resumed = false;           // --run-dir: a restart in an existing run folder
  double start_mono_s = 0.0;      // when the driver started (core::monotonic_s)
  c10::Device device{c10::kCPU};  // this rank's device (train::select_device)
  std::filesystem::path run_dir;  // set once the folder exists
  profile::Profiler& profiler;
  PhaseDriver& phases;
};

// The energy measured over the run's windows (rank 0's rows; empty when no node measures).
struct EnergyResult {
  bool active = false;
  std::vector<report::EnergyWindowRecord> rows;
  // The sum over the windows named `windows`, or nothing when no power source measured.
  std::optional<double> sum_wh(const std::vector<std::string>& windows) const;
};

// One run of a workload. The driver calls the hooks in the order of this file's header; each is
// called on every rank unless it says "rank 0".
class WorkloadRun {
 public:
  virtual ~WorkloadRun() = default;

  // init, before the run folder exists. The parallel layout on env.device: process groups and
  // the checks of the config against the rank count (errors agreed over the ranks).
  virtual void layout(RunEnv& env) = 0;
  // The run's lower-bound memory per rank (core/memory_budget.hpp), checked before any file.
  virtual core::MemoryEstimate memory_estimate(const RunEnv& env) const = 0;
  // After the folder exists: the run-wide settings it makes (determinism, TF32) and what
  // system.json records of them beyond the driver's facts.
  virtual void describe(RunEnv& env, report::SystemInfo& info) {
    (void)env;
    (void)info;
  }
  virtual bool has_data() const { return true; }
  // The phase prepare_data() runs in; empty: it runs in none and names its own phases through
  // env.phases (ScaFFold's "fractals" and "get_dataset").
  virtual std::string data_phase() const { return "data"; }
  virtual void prepare_data(RunEnv& env) { (void)env; }
  virtual void build(RunEnv& env) = 0;  // in phase "init_model"
  // After init_model: further phases (a peak probe) and the model's log lines.
  virtual void after_build(RunEnv& env) { (void)env; }

  // The training loop build() made; nullptr for a run without one (run_without_loop).
  virtual train::TrainingLoop* loop() = 0;
  // Untimed warm-up outside the loop, before a resume (ScaFFold's steps undone exactly, in its own
  // phase); it adds its energy windows to `energy`.
  virtual void warm_up(RunEnv& env, energy::EnergyMeter& energy) {
    (void)env;
    (void)energy;
  }
  // Called with a failure of the training loop before it propagates: may throw an error that says
  // more in the workload's own terms (the U-Net names the keys that size it when memory runs out).
  virtual void explain_failure(const std::exception& error, const std::string& doing) {
    (void)error;
    (void)doing;
  }
  // Rank 0 of a resumed run: keep the rows of its per-epoch file up to `start`.
  virtual void resume_rows(RunEnv& env, const train::TrainCounters& start) {
    (void)env;
    (void)start;
  }
  // Right before the loop starts (marks of counters, a start line).
  virtual void before_training(RunEnv& env) { (void)env; }
  // After each reported epoch (or log interval), after the driver's energy windows: the log
  // line, the stdout lines, the row of the per-epoch file (rank 0).
  virtual void on_epoch(RunEnv& env, const train::LoopEpoch& e) = 0;
  // A run without a training loop measures here; it adds its own energy windows.
  virtual train::LoopResult run_without_loop(RunEnv& env, energy::EnergyMeter& energy);
  // After training, every rank (collectives over the ranks' figures go here).
  virtual void after_training(RunEnv& env, const train::LoopResult& result) {
    (void)env;
    (void)result;
  }

  // Rank 0, after training: what the run learned while training that system.json records (the
  // kernels each op actually ran). `info` is the system.json written at init; the driver writes it
  // back when this returns.
  virtual void describe_after_training(report::SystemInfo& info) { (void)info; }

  // Rank 0: the record's batch, precision, epochs, times, parameters and counters, and the
  // figures' log lines. The driver has set workload, system, ranks, status and runtime_s. Returns
  // false when there are no figures (stopped before the first timed epoch ended).
  virtual bool finish(RunEnv& env, const train::LoopResult& result, const EnergyResult& energy,
                      report::RunRecord& rec) = 0;
  // What one LoopEpoch is to this workload ("epoch", "log interval"), and where a stopped run
  // got to ("epoch 3", "iteration 40"), for the driver's stop lines.
  virtual std::string unit() const { return "epoch"; }
  virtual std::string reached(const train::LoopResult& result) const;
  // Rank 0, last: the reference's closing lines on stdout (only when finish() had figures).
  virtual void closing_lines(RunEnv& env, const train::LoopResult& result) {
    (void)env;
    (void)result;
  }
};

// The driver itself: made before the config is read (threads, profiler, stop signals), then run
// with the workload's run and the config's settings. Use drive<C>() below.
class Driver {
 public:
  Driver(cli::RunContext& ctx, const cli::WorkloadArgs& args, std::string workload);
  int run(WorkloadRun& run, const RunSettings& settings);

 private:
  cli::RunContext& ctx_;
  const cli::WorkloadArgs& args_;
  std::string workload_;
  double start_mono_s_;
  profile::Profiler profiler_;
  PhaseDriver phases_;
};

// The settings every workload config C has (device, device_sharing, progress_timeout_s,
// checkpoint_dir, base_run_dir, job_name).
template <class C>
RunSettings settings_of(const C& cfg, const cli::WorkloadArgs& args) {
  RunSettings s;
  s.device = cfg.device;
  s.device_sharing = cfg.device_sharing;
  s.progress_timeout_s = cfg.progress_timeout_s;
  s.checkpoint_dir = cfg.checkpoint_dir;
  s.folder = run_folder_request(cfg, args.config.files, args.config.given_flags(), args.run_dir,
                                args.argv);
  return s;
}

// Runs workload `name`: loads its config C on every rank (rank 0's, broadcast), starts a run of it
// with `start` and drives it. Returns the exit code.
template <class C>
int drive(cli::RunContext& ctx, const cli::WorkloadArgs& args, const std::string& name,
          std::unique_ptr<WorkloadRun> (*start)(const C&, const cli::WorkloadArgs&)) {
  Driver driver(ctx, args, name);
  const C cfg = cli::load_config_everywhere_as<C>(ctx.comm, args.config);
  const std::unique_ptr<WorkloadRun> run = start(cfg, args);
  return driver.run(*run, settings_of(cfg, args));
}

// A workload of the suite, as the registry (workloads/registry.cpp) lists it: its name, its
// subcommand (one flag per key of its config's schema, run through the driver) and the result
// table `scaffold report` prints its run folders with (its summary.json's workload is `name`;
// none for the ScaFFold benchmark, whose scaling table report/table.hpp keeps).
struct Workload {
  std::string name;
  std::function<cli::Subcommand(CLI::App& app, int argc, char** argv)> add_subcommand;
  std::optional<report::WorkloadTable> table;
};

// The record of a workload whose config struct is C: `start` makes a run of a loaded config;
// `extras` are its keys without a flag and its own flags (cli::add_workload_subcommand).
template <class C>
Workload make_workload(std::string name, std::string help,
                       std::unique_ptr<WorkloadRun> (*start)(const C&, const cli::WorkloadArgs&),
                       std::optional<report::WorkloadTable> table,
                       cli::SubcommandExtras extras = {}) {
  Workload w;
  w.name = name;
  w.add_subcommand = [name, help, start, extras](CLI::App& app, int argc, char** argv) {
    return cli::add_workload_subcommand<C>(
        app, name, help, argc, argv,
        [name, start](cli::RunContext& ctx, const cli::WorkloadArgs& args) {
          return drive<C>(ctx, args, name, start);
        },
        extras);
  };
  w.table = std::move(table);
  return w;
}

}  // namespace scaffold::suite
