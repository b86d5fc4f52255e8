// `scaffold report RUN_DIR...`: result tables over run folders (pretty, csv, markdown or json on
// stdout). Folders of `scaffold benchmark` (ScaFFold) make one table ordered by (scale, ranks),
// with --plot a PNG of time and energy to target against ranks; folders whose summary.json names
// another workload are grouped by workload and printed through that workload's columns
// (each workload's table, from the registry). Reads only what the runs wrote; trains nothing.
// Rank 0 does the work; under mpirun the other ranks only agree on success or failure.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "config/load.hpp"
#include "core/error.hpp"
#include "report/record_table.hpp"
#include "report/run_record.hpp"
#include "report/table.hpp"
#include "suite/command_line.hpp"
#include "workloads/scaffold/schema.hpp"

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
  // A config.yaml from before the key has none: those runs had global statistics, the only mode
  // then (the table says so); the loaded default (local) would misname them.
  const bool has_key =
      text.rfind("dc_groupnorm:", 0) == 0 || text.find("\ndc_groupnorm:") != std::string::npos;
  facts.dc_groupnorm = has_key ? cfg.dc_groupnorm : "";
  return facts;
}

// The folders sorted by how they are reported.
struct Runs {
  std::vector<report::RunSummary> benchmark;                          // ScaFFold's table
  std::map<std::string, std::vector<report::RunRecord>> by_workload;  // the other workloads
};

// The table of `workload` among `tables`, or nullptr.
const report::WorkloadTable* find_table(const std::vector<report::WorkloadTable>& tables,
                                        const std::string& workload) {
  for (const report::WorkloadTable& t : tables)
    if (t.workload == workload) return &t;
  return nullptr;
}

Runs read_runs(const std::vector<std::string>& run_dirs,
               const std::vector<report::WorkloadTable>& tables) {
  Runs runs;
  for (const std::string& dir : run_dirs) {
    const fs::path summary = fs::path(dir) / report::kSummaryFileName;
    std::error_code ec;
    if (fs::is_regular_file(summary, ec)) {
      report::RunRecord record = report::read_summary_json(summary);
      if (record.workload == report::kBenchmarkWorkload) {
        // Read like every other workload's record; a folder from before the record carried the
        // table's counters is read through its CSV files below.
        if (std::optional<report::RunSummary> row = report::summarize_record(record, dir)) {
          runs.benchmark.push_back(std::move(*row));
          continue;
        }
      } else {
        const report::WorkloadTable* table = find_table(tables, record.workload);
        if (table == nullptr) {
          std::vector<std::string> known{report::kBenchmarkWorkload};
          for (const report::WorkloadTable& t : tables) known.push_back(t.workload);
          throw core::FileError(
              dir, fmt::format("its summary.json is of workload \"{}\", which scaffold report has "
                               "no table for (known workloads: {})",
                               record.workload, fmt::join(known, ", ")));
        }
        // One bad folder fails the whole call (docs/reports.md): no table with a hole in it.
        if (table->check) table->check(dir, record);
        runs.by_workload[record.workload].push_back(std::move(record));
        continue;
      }
    }
    runs.benchmark.push_back(
        report::summarize_run(report::read_run_folder(dir, read_config_facts)));
  }
  report::sort_for_scaling(runs.benchmark);
  return runs;
}

// Every table in `format`: ScaFFold's first (headed only when other workloads follow, so its
// output alone is what it always was), then one per workload in the suite's order, a blank line
// between tables. json: ScaFFold's rows, or else every record in one array.
std::string format_runs(const Runs& runs, const std::vector<report::WorkloadTable>& tables,
                        const std::string& format) {
  if (format == "json") {
    if (!runs.benchmark.empty() && !runs.by_workload.empty())
      throw core::Error(
          "--format json: `scaffold benchmark` folders and other workloads' folders (" +
          runs.by_workload.begin()->first +
          ") have different records; report them in separate calls");
    if (runs.by_workload.empty()) return report::format_table(runs.benchmark, format);
  }
  std::string out;
  std::vector<report::RunRecord> all_records;
  if (!runs.benchmark.empty()) {
    if (!runs.by_workload.empty())
      out += report::workload_heading(report::kBenchmarkWorkload, format);
    out += report::format_table(runs.benchmark, format);
  }
  for (const report::WorkloadTable& table : tables) {
    const auto it = runs.by_workload.find(table.workload);
    if (it == runs.by_workload.end()) continue;
    if (format == "json") {
      std::vector<report::RunRecord> records = it->second;
      report::sort_records(table, records);
      all_records.insert(all_records.end(), records.begin(), records.end());
      continue;
    }
    out += (out.empty() ? "" : "\n") + report::format_workload_table(table, it->second, format);
  }
  return format == "json" ? report::run_records_json(all_records) : out;
}

int run_report(RunContext& ctx, const ReportArgs& args,
               const std::vector<report::WorkloadTable>& tables) {
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    const Runs runs = read_runs(args.run_dirs, tables);
    const std::string table = format_runs(runs, tables, args.format);
    // The plot first: a failed --plot must not leave a table on stdout that looks like success.
    if (!args.plot.empty()) {
      if (runs.benchmark.empty() && !runs.by_workload.empty())
        throw core::Error("--plot " + args.plot +
                          ": the plot is of `scaffold benchmark` runs (time to target against "
                          "ranks), and none of the folders is one");
      report::write_scaling_plot(args.plot, runs.benchmark);
    }
    if (std::fwrite(table.data(), 1, table.size(), stdout) != table.size() ||
        std::fflush(stdout) != 0)
      throw core::Error("cannot write the table to standard output");
  });
  return 0;
}

}  // namespace

Subcommand add_report(CLI::App& app, std::vector<report::WorkloadTable> tables) {
  auto* sub = app.add_subcommand(
      "report", "print result tables over run folders, one per workload (scaling studies: --plot)");
  auto args = std::make_shared<ReportArgs>();
  sub->add_option("run_dirs", args->run_dirs,
                  "run folders: written by `scaffold benchmark` (config.yaml, train_stats.csv, and "
                  "energy_stats.csv and system.json when present), or by another workload "
                  "(summary.json)")
      ->required();
  sub->add_option("--format", args->format, "table format")
      ->check(CLI::IsMember(report::table_format_names()))
      ->capture_default_str();
  sub->add_option("--plot", args->plot,
                  "also draw time (and energy) to target against ranks of the `scaffold "
                  "benchmark` runs into this PNG (needs gnuplot)");
  return {sub, [args, tables = std::move(tables)](RunContext& ctx) {
            return run_report(ctx, *args, tables);
          }};
}

}  // namespace scaffold::cli
