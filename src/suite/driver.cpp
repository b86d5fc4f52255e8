#include "suite/driver.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "core/watchdog.hpp"
#include "dist/communicator.hpp"
#include "kernels/probe_verdicts.hpp"
#include "profile/options.hpp"
#include "report/system_info.hpp"
#include "suite/record.hpp"
#include "suite/stop_signals.hpp"
#include "train/device.hpp"
#include "train/device_memory.hpp"
#include "train/loop.hpp"

namespace scaffold::suite {
namespace fs = std::filesystem;

std::optional<double> EnergyResult::sum_wh(const std::vector<std::string>& windows) const {
  if (!active) return std::nullopt;
  double sum = 0.0;
  for (const auto& w : rows)
    if (std::find(windows.begin(), windows.end(), w.window) != windows.end()) sum += w.energy_wh;
  return sum;
}

train::LoopResult WorkloadRun::run_without_loop(RunEnv& env, energy::EnergyMeter& energy) {
  (void)env;
  (void)energy;
  throw core::Error("this workload's run built no training loop and has no other measurement");
}

std::string WorkloadRun::reached(const train::LoopResult& result) const {
  return fmt::format("epoch {}", result.last_epoch);
}

namespace {

profile::Profiler make_profiler(const cli::RunContext& ctx) {
  const profile::ProfileOptions options = profile::profile_options_from_env();
  return profile::Profiler(profile::profiles_this_rank(options, ctx.comm.local_rank()),
                           options.schedule);
}

}  // namespace

Driver::Driver(cli::RunContext& ctx, const cli::WorkloadArgs& args, std::string workload)
    : ctx_(ctx),
      args_(args),
      workload_(std::move(workload)),
      start_mono_s_(core::monotonic_s()),
      profiler_(make_profiler(ctx)),
      phases_(&profiler_) {
  at::set_num_threads(ctx.threads);
  install_stop_signals(ctx.stop_signals);
}

int Driver::run(WorkloadRun& run, const RunSettings& settings) {
  dist::Communicator& comm = ctx_.comm;
  RunEnv env{comm,          ctx_.threads,           args_, !args_.run_dir.empty(),
             start_mono_s_, c10::Device(c10::kCPU), {},    profiler_,
             phases_};

  // init: device, layout, memory, run folder, context.
  const train::DeviceChoice device_choice =
      train::select_device(settings.device, settings.device_sharing, comm);
  env.device = device_choice.device;
  run.layout(env);
  dist::run_agreed(comm, [&] {
    train::check_memory_budget_on(workload_, run.memory_estimate(env), env.device,
                                  comm.local_size(), settings.device_sharing);
  });
  env.run_dir = prepare_run_folder(comm, settings.folder);
  std::optional<SetupGuard> setup_guard(std::in_place, comm, env.run_dir, env.resumed);
  LOG_INFO("{}: run folder {}", workload_, env.run_dir.string());
  report::SystemInfo system_info;  // as written (rank 0): training may add to it
  {
    report::SystemInfo info;
    info.gpu_model = train::device_model_name(env.device);
    info.device = env.device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx_.threads;
    run.describe(env, info);
    system_info = write_run_context(comm, env.run_dir, info);
  }

  // data, model
  if (run.has_data()) {
    const std::string phase = run.data_phase();
    if (phase.empty())
      run.prepare_data(env);
    else
      phases_.run(phase.c_str(), [&] { run.prepare_data(env); });
  }
  phases_.run("init_model", [&] { run.build(env); });
  run.after_build(env);

  // training
  train::TrainingLoop* loop = run.loop();
  std::unique_ptr<core::Watchdog> watchdog;
  if (loop) {
    watchdog = progress_watchdog(comm, settings.progress_timeout_s);
    loop->set_watchdog(&*watchdog);
  }
  energy::EnergyMeter energy(comm);
  phases_.set_energy_meter(&energy);
  run.warm_up(env, energy);
  train::TrainCounters start;
  if (loop && env.resumed) start = loop->resume(env.run_dir / settings.checkpoint_dir);
  if (loop && env.resumed && comm.rank() == 0) run.resume_rows(env, start);
  run.before_training(env);
  setup_guard.reset();  // training starts: the folder stays whatever happens now
  train::LoopResult result;
  if (loop) {
    result = phases_.run("training", [&] {
      try {
        return loop->run([&](const train::LoopEpoch& e) {
          // The training part of each epoch, and the validation of the timed ones (energy.md).
          energy.add_window(e.warmup ? "warmup" : "train", e.epoch, e.start_mono_s,
                            e.validation_start_mono_s);
          if (!e.warmup && e.validated)
            energy.add_window("validation", e.epoch, e.validation_start_mono_s, e.end_mono_s);
          run.on_epoch(env, e);
        });
      } catch (const std::exception& e) {
        run.explain_failure(e, "train");
        throw;
      }
    });
  } else {
    result = run.run_without_loop(env, energy);
  }
  run.after_training(env, result);
  if (loop) loop->set_watchdog(nullptr);
  watchdog.reset();
  phases_.set_energy_meter(nullptr);
  EnergyResult energy_result;
  energy_result.active = energy.active();
  energy_result.rows = energy.finish(env.run_dir, start.epoch + 1);
  profiler_.finish();

  // report, rank 0
  const int exit_code = result.stopped ? kExitStoppedBySignal : 0;
  if (comm.rank() != 0) return exit_code;
  {
    report::SystemInfo info = system_info;
    run.describe_after_training(info);
    // Every kernel probe of this process (GEMM, convolutions, transforms: whatever the workload
    // asked), then the verdicts taken from the checkpoint this run resumed from.
    for (std::string& line : kernels::probe_verdicts().lines())
      info.kernel_probes.push_back(std::move(line));
    if (report::system_info_json(info) != report::system_info_json(system_info))
      report::write_system_json(env.run_dir, info);
  }
  const std::string restart = (env.run_dir / "restart.sh").string();
  report::RunRecord rec = base_record(workload_, env.run_dir, comm, ctx_.threads, env.device.str());
  rec.status = result.stopped ? report::kStatusTimeLimit : report::kStatusCompleted;
  for (const auto& p : phases_.phases()) rec.runtime_s += p.seconds;
  const bool figures = run.finish(env, result, energy_result, rec);
  if (!figures) {
    // Stopped before the first timed epoch ended: nothing to report but the reason.
    rec.status = report::kStatusTimeLimit;
    LOG_WARN("stopped by {} before the first timed {} finished: no figures; {} resumes the run",
             signal_name(result.stop_signal), run.unit(), restart);
  }
  report::write_summary_json(env.run_dir, rec);
  if (!figures) return exit_code;
  const int64_t peak = train::device_peak_allocated_bytes(env.device);
  LOG_INFO("peak memory: process RSS {:.2f} GiB{}; phase wall times: {}",
           static_cast<double>(core::peak_rss_bytes()) / (1 << 30),
           peak >= 0 ? fmt::format(", {} allocated {:.2f} GiB", env.device.str(),
                                   static_cast<double>(peak) / (1 << 30))
                     : std::string(),
           phases_.summary());
  if (result.stopped)
    LOG_WARN("stopped by {} after {}: the files are complete up to it; {} resumes the run",
             signal_name(result.stop_signal), run.reached(result), restart);
  run.closing_lines(env, result);
  return exit_code;
}

}  // namespace scaffold::suite
