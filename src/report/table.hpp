// Result tables over run folders (`scaffold report`): each run folder becomes one RunSummary
// record (scale, ranks, shards, global batch, epochs, time to target, FOM, median epoch time,
// samples/s, energy to target, samples/Wh; definitions in docs/reports.md), and writers
// (pretty, csv, markdown, json) print the records through one declaration of the columns.
// Also the scaling plot (time and energy to target against ranks, through gnuplot). This module
// does not parse YAML: the caller passes a reader for config.yaml (config/ owns YAML).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "report/energy_stats.hpp"
#include "report/run_record.hpp"
#include "report/system_info.hpp"
#include "report/train_stats.hpp"

namespace scaffold::report {

// RunRecord::workload of `scaffold benchmark` (ScaFFold) runs. `scaffold report` reads their
// folders through this table (config.yaml, train_stats.csv), whether or not they hold a
// summary.json.
inline constexpr const char* kBenchmarkWorkload = "benchmark";

// What a summary needs from the run's config.yaml.
struct RunConfigFacts {
  int problem_scale = 0;
  int local_batch_size = 1;
  std::vector<int> dc_num_shards{1, 1, 1};
  double target_dice = 0.95;
  std::string dc_groupnorm;  // GroupNorm statistics of a sharded sample: local | global
};

// Turns config.yaml's text into RunConfigFacts; `source` (the file's path) names it in errors.
using RunConfigReader =
    std::function<RunConfigFacts(const std::string& yaml_text, const std::string& source)>;

// Everything `scaffold report` reads from one run folder.
struct RunData {
  std::string name;                                       // the folder's own name
  RunConfigFacts config;                                  // from config.yaml
  std::vector<EpochRecord> epochs;                        // train_stats.csv
  std::optional<std::vector<EnergyWindowRecord>> energy;  // nullopt: no energy_stats.csv
  std::optional<SystemInfo> system;                       // nullopt: no system.json
  std::optional<std::string> status;                      // summary.json's; nullopt: none there
};

// Reads a run folder. A path that is not a folder, or a folder without config.yaml or
// train_stats.csv, is a core::FileError naming it; so is any file in it that does not parse.
RunData read_run_folder(const std::filesystem::path& run_dir, const RunConfigReader& read_config);

// One table row: a run's results, with the unit in every measured name.
struct RunSummary {
  std::string run;  // run folder name
  int problem_scale = 0;
  int ranks = 1;                  // system.json world_size; 1 without system.json
  int shards = 1;                 // prod(dc_num_shards): spatial shards per sample
  std::string dc_groupnorm;       // sharded runs: local | global GroupNorm statistics; "" unsharded
  int64_t global_batch = 0;       // local_batch_size × max(1, ranks / shards)
  int64_t epochs = 0;             // last epoch in train_stats.csv
  bool reached_target = false;    // last row's val_dice >= target_dice
  double time_to_target_s = 0.0;  // Σ epoch_duration; only a lower bound when !reached_target
  std::optional<double> fom_per_s;            // 1 / time_to_target_s; only when reached
  std::optional<double> median_epoch_s;       // median epoch_duration; none without rows
  int64_t training_samples = 0;               // Σ optimizer_steps × global_batch
  std::optional<double> samples_per_s;        // training_samples / Σ epoch_duration
  std::optional<double> energy_to_target_wh;  // Σ energy_wh of train + validation windows
  std::optional<double> samples_per_wh;       // training_samples / energy_to_target_wh
  // How the run ended (RunRecord::status: reached_target, not_reached, time_limit, ...), from
  // summary.json; a folder without one (older runs) gets reached_target or not_reached.
  std::string status;
};

RunSummary summarize_run(const RunData& run);

// The same row from a `scaffold benchmark` run's summary.json (`source` names it in errors), as
// every other workload's folder is read. A record written before it carried the counters this
// needs (training_samples, median_epoch_s, the "shards" parameter) gives nullopt: such a folder
// is read through its CSV files (read_run_folder) as before. The row is named after `run_dir`'s
// folder, as read_run_folder names it.
std::optional<RunSummary> summarize_record(const RunRecord& record,
                                           const std::filesystem::path& run_dir);

// Orders rows for scaling studies: by (problem_scale, ranks), then by run name.
void sort_for_scaling(std::vector<RunSummary>& rows);

// The writers' names, in the order --help lists them: pretty, csv, markdown, json.
std::vector<std::string> table_format_names();

// The whole table text in `format` (one of table_format_names()), ending with a newline.
// An unknown format is a core::Error listing the valid ones.
std::string format_table(const std::vector<RunSummary>& rows, const std::string& format);

// Draws time to target [s] (left axis) and, where any run has it, energy to target [Wh] (right
// axis) against ranks (log2 axis), one line per problem scale; runs that did not reach the target
// are drawn hollow. Writes `png` (1800x1200) atomically. Unlike the run figures this is a
// user request, so no gnuplot on PATH, a gnuplot failure or no rows is a core::Error.
void write_scaling_plot(const std::filesystem::path& png, const std::vector<RunSummary>& rows);

}  // namespace scaffold::report
