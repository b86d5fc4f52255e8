// scaffold's command line (cli/app.hpp): parses the command line (CLI11), starts MPI (a single
// process is a world of one; a launch MPI cannot join, or one that makes N singletons, is refused
// first), configures logging and threads, runs one subcommand, and turns every failure into one
// clear message and a non-zero exit on every rank, never a hang:
//   usage errors -> 2; launch mistakes and errors all ranks agreed on -> 1 on each rank; anything
//   else on a multi-rank job -> MPI_Abort (every rank ends).
// `scaffold power` starts no MPI: the command it wraps is the MPI program. SIGXFSZ is ignored, so
// a file-size limit is a clear write error, not a kill.
#include "cli/app.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/threads.hpp"
#include "core/version.hpp"
#include "dist/launcher.hpp"
#include "suite/command_line.hpp"
#include "suite/stop_signals.hpp"

namespace {

std::string version_text() {
  return fmt::format("scaffold {} (commit {}, LibTorch {})", scaffold::core::version(),
                     scaffold::core::git_commit(), scaffold::core::torch_version_built_with());
}

}  // namespace

namespace scaffold::cli {

int run_scaffold(int argc, char** argv, const std::vector<suite::Workload>& workloads,
                 const std::vector<std::function<Subcommand(CLI::App&)>>& tools) {
  // Over a file-size limit (ulimit -f) a write fails with EFBIG, which the writer reports naming
  // its file and removes its temporary; the default action would kill the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "scaffold: the ScaFFold 3-D U-Net benchmark and a suite of HPC deep-learning "
      "benchmarks, in native C++",
      "scaffold"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1, 1);
  app.fallthrough();  // global flags may also follow the subcommand name
  int verbose = 0;
  bool all_ranks = false;
  app.add_flag("-v,--verbose", verbose,
               "more output: -v turns on DEBUG messages on every rank (each line names its rank)");
  app.add_flag("--log-all-ranks", all_ranks, "every rank logs, not only rank 0");
  std::vector<std::string> stop_signal_names = suite::kDefaultStopSignals;
  app.add_option("--stop-signals", stop_signal_names,
                 "signals that stop a training run cleanly after the step in flight (exit 3, files "
                 "complete, restart.sh resumes it), e.g. the one a scheduler sends before its time "
                 "limit (sbatch --signal=USR2@120); names or numbers, comma separated: " +
                     suite::stop_signal_choices())
      ->delimiter(',')
      ->capture_default_str();

  // The subcommands, in one explicit list (no static registration): the workloads and their
  // tools (workloads/registry.cpp), then report and power.
  std::vector<cli::Subcommand> subcommands;
  std::vector<report::WorkloadTable> tables;
  for (const suite::Workload& w : workloads) {
    subcommands.push_back(w.add_subcommand(app, argc, argv));
    if (w.table) tables.push_back(*w.table);
  }
  for (const auto& add_tool : tools) subcommands.push_back(add_tool(app));
  subcommands.push_back(cli::add_report(app, std::move(tables)));
  subcommands.push_back(cli::add_power(app));
  // CLI11 says only "A subcommand is required" for a mistyped one: name it and the choices.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    // --stop-signals is the one global option with a value; its spaced form
    // (`--stop-signals USR1 llm_training`) must not read USR1 as the subcommand.
    if (word == "--stop-signals") {
      ++i;
      continue;
    }
    if (!word.empty() && word[0] == '-') continue;  // the other global flags take no value
    bool known = false;
    std::string names;
    for (const auto& sub : subcommands) {
      known = known || sub.app->check_name(word);
      names += (names.empty() ? "" : ", ") + sub.app->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "scaffold: unknown subcommand '%s'; available: %s (scaffold --help)\n",
                   word.c_str(), names.c_str());
      return 2;
    }
    break;
  }
  // jpwr's command line without "--" before COMMAND (cli::separate_power_command).
  std::vector<std::string> words =
      cli::separate_power_command(app, *app.get_subcommand("power"), {argv + 1, argv + argc});
  std::vector<char*> words_argv = {argv[0]};
  for (auto& w : words) words_argv.push_back(w.data());
  try {
    app.parse(static_cast<int>(words_argv.size()), words_argv.data());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help/version (rc 0) or the error
    return rc == 0 ? 0 : 2;
  }

  std::vector<int> stop_signals;
  try {
    stop_signals = suite::parse_stop_signals(stop_signal_names);
  } catch (const core::UsageError& e) {
    std::fprintf(stderr, "scaffold: --stop-signals: %s\n", e.what());
    return 2;
  }
  for (auto& sub : subcommands) {
    if (!sub.app->parsed() || !sub.run_without_mpi) continue;
    core::LogOptions log;
    log.level = verbose > 0 ? core::LogLevel::Debug : core::LogLevel::Info;
    log.rank = dist::read_launch_environment(dist::process_environment()).rank;
    log.all_ranks = all_ranks || verbose > 0;
    core::log_configure(log);
    try {
      return sub.run_without_mpi();
    } catch (const core::UsageError& e) {
      LOG_ERROR("{}", core::error_text(e));
      return 2;  // as every other subcommand's usage errors
    } catch (const std::exception& e) {
      LOG_ERROR("{}", core::error_text(e));
      return 1;
    }
  }

  try {
    dist::Runtime runtime(&argc, &argv);
    dist::Communicator& comm = runtime.world();
    core::LogOptions log;
    log.level = verbose > 0 ? core::LogLevel::Debug : core::LogLevel::Info;
    log.rank = comm.rank();
    // Debugging a multi-rank run needs every rank's view; each line carries [rank=N].
    log.all_ranks = all_ranks || verbose > 0;
    core::log_configure(log);
    if (const std::string w = core::omp_num_threads_warning(); !w.empty()) LOG_WARN("{}", w);

    for (auto& sub : subcommands) {
      if (!sub.app->parsed()) continue;
      try {
        cli::RunContext ctx{comm};
        ctx.stop_signals = stop_signals;
        return sub.run(ctx);
      } catch (const dist::AgreedError& e) {
        // Every rank threw this; rank 0 says it once and all exit normally with 1.
        if (comm.rank() == 0) LOG_ERROR("{}", core::error_text(e));
        return 1;
      } catch (const core::UsageError& e) {
        LOG_ERROR("{}", core::error_text(e));
        if (comm.size() > 1) comm.abort(2);
        return 2;
      } catch (const std::exception& e) {
        LOG_ERROR("{}", core::error_text(e));
        if (comm.size() > 1) {
          LOG_ERROR("rank {} failed alone: aborting all {} ranks", comm.rank(), comm.size());
          comm.abort(1);
        }
        return 1;
      }
    }
  } catch (const dist::LaunchError& e) {
    // Every process of the launch fails alike; the launcher's rank 0 says it, once.
    if (e.report_here()) std::fprintf(stderr, "scaffold: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaffold: %s\n", core::error_text(e).c_str());
    return 1;
  }
  return 2;
}

}  // namespace scaffold::cli
