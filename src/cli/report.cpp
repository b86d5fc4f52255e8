// `scaffold report RUN_DIR...`: one result table over run folders (pretty, csv, markdown or json
// on stdout), rows ordered by (scale, ranks) for scaling studies, and with --plot a PNG of time
// and energy to target against ranks. Reads only what `scaffold benchmark` wrote; trains nothing.
// Rank 0 does the work; under mpirun the other ranks only agree on success or failure.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/common.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "report/table.hpp"

namespace scaffold::cli {
namespace {
namespace fs = std::filesystem;

struct ReportArgs {
  std::vector<std::string> run_dirs;
  std::string format = "pretty";
  std::string plot;  // "" = no plot
};

// config.yaml is read through config/ (the only YAML reader), keeping report/ free of yaml-cpp.
report::RunConfigFacts read_config_facts(const std::string& text, const std::string& source) {
  const config::Config cfg = config::config_from_yaml_text(text, source);
  report::RunConfigFacts facts;
  facts.problem_scale = cfg.problem_scale;
  facts.local_batch_size = cfg.local_batch_size;
  facts.dc_num_shards = cfg.dc_num_shards;
  facts.target_dice = cfg.target_dice;
  return facts;
}

int run_report(RunContext& ctx, const ReportArgs& args) {
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    std::vector<report::RunSummary> rows;
    for (const std::string& dir : args.run_dirs)
      rows.push_back(report::summarize_run(report::read_run_folder(dir, read_config_facts)));
    report::sort_for_scaling(rows);
    // The plot first: a failed --plot must not leave a table on stdout that looks like success.
    if (!args.plot.empty()) report::write_scaling_plot(args.plot, rows);
    const std::string table = report::format_table(rows, args.format);
    if (std::fwrite(table.data(), 1, table.size(), stdout) != table.size() ||
        std::fflush(stdout) != 0)
      throw core::Error("cannot write the table to standard output");
  });
  return 0;
}

}  // namespace

Subcommand add_report(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "report", "print one result table over benchmark run folders (scaling studies: --plot)");
  auto args = std::make_shared<ReportArgs>();
  sub->add_option("run_dirs", args->run_dirs,
                  "run folders written by `scaffold benchmark` (config.yaml, train_stats.csv, and "
                  "energy_stats.csv and system.json when present)")
      ->required();
  sub->add_option("--format", args->format, "table format")
      ->check(CLI::IsMember(report::table_format_names()))
      ->capture_default_str();
  sub->add_option(
      "--plot", args->plot,
      "also draw time (and energy) to target against ranks into this PNG (needs gnuplot)");
  return {sub, [args](RunContext& ctx) { return run_report(ctx, *args); }};
}

}  // namespace scaffold::cli
