// scaffold: entry point. Parses the command line (CLI11), starts MPI (a single process is a
// world of one), configures logging and threads, runs one subcommand, and turns every failure
// into one clear message and a non-zero exit on every rank, never a hang:
//   usage errors -> 2; errors all ranks agreed on -> 1 on each rank; anything else on a
//   multi-rank job -> MPI_Abort (every rank ends).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "cli/common.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#ifdef SCAFFOLD_WITH_IMAGE_CLASSIFICATION
#include "workloads/image_classification/workload.hpp"
#endif
#include "workloads/fno/data/generate_pde_data.hpp"

namespace {

std::string version_text() {
  return fmt::format("scaffold {} (commit {}, LibTorch {})", scaffold::core::version(),
                     scaffold::core::git_commit(), scaffold::core::torch_version_built_with());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace scaffold;
  CLI::App app{"scaffold: the ScaFFold 3-D U-Net benchmark and a suite of HPC deep-learning "
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

  // The workloads and tools, in one explicit list (no static registration): the ScaFFold
  // benchmark and its data steps, CARAML's workloads, then report and power.
  std::vector<cli::Subcommand> subcommands{cli::add_generate_fractals(app), cli::add_generate_dataset(app),
                                          cli::add_benchmark(app, argc, argv)};
#ifdef SCAFFOLD_WITH_IMAGE_CLASSIFICATION  // needs libjpeg and libpng (scripts/install-deps)
  subcommands.push_back(imgcls::add_image_classification(app, argc, argv));
#endif
  subcommands.push_back(fno::add_generate_pde_data(app));  // the FNO workload's PDE data
  subcommands.push_back(cli::add_report(app));
  subcommands.push_back(cli::add_power(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help/version (rc 0) or the error
    return rc == 0 ? 0 : 2;
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

    for (auto& sub : subcommands) {
      if (!sub.app->parsed()) continue;
      try {
        cli::RunContext ctx{comm};
        return sub.run(ctx);
      } catch (const dist::AgreedError& e) {
        // Every rank threw this; rank 0 says it once and all exit normally with 1.
        if (comm.rank() == 0) LOG_ERROR("{}", e.what());
        return 1;
      } catch (const core::UsageError& e) {
        LOG_ERROR("{}", e.what());
        if (comm.size() > 1) comm.abort(2);
        return 2;
      } catch (const std::exception& e) {
        LOG_ERROR("{}", e.what());
        if (comm.size() > 1) {
          LOG_ERROR("rank {} failed alone: aborting all {} ranks", comm.rank(), comm.size());
          comm.abort(1);
        }
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaffold: %s\n", e.what());
    return 1;
  }
  return 2;
}
