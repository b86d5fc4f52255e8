// generate_pde_data: config (files + generated flags, loaded on rank 0 and broadcast), then
// ensure_fno_dataset over all ranks, then one line naming the dataset. Flags: every FnoDataConfig
// key as --key-with-dashes, and --threads.
#include "workloads/fno/data/generate_pde_data.hpp"

#include <memory>

#include "core/log.hpp"
#include "core/version.hpp"
#include "workloads/fno/data/config_options.hpp"
#include "workloads/fno/data/generate.hpp"

namespace scaffold::fno {

cli::Subcommand add_generate_pde_data(CLI::App& app) {
  auto* sub = app.add_subcommand("generate_pde_data",
                                 "generate (or reuse from the cache) the PDE dataset of the FNO "
                                 "workload: Burgers, Navier-Stokes or "
                                 "Rayleigh-Benard");
  auto args = std::make_shared<cli::ConfigArgs>();
  auto threads = std::make_shared<int>(1);
  cli::add_config_files_option(sub, args.get());
  cli::add_threads_option(sub, threads.get());
  cli::add_schema_flags<config::FnoDataConfig>(sub, args.get());
  return {sub, [args, threads](cli::RunContext& ctx) {
            ctx.threads = *threads;
            const auto cfg = cli::load_config_everywhere_as<config::FnoDataConfig>(ctx.comm, *args);
            const FnoDatasetInfo info = ensure_fno_dataset(
                ctx.comm, fno_data_options(cfg, ctx.threads, core::git_commit()));
            LOG_INFO("pde data ready: {} ({} train + {} val examples of {})", info.root.string(),
                     info.meta.examples(FnoSplit::Train), info.meta.examples(FnoSplit::Val),
                     info.meta.problem);
            return 0;
          }};
}

}  // namespace scaffold::fno
