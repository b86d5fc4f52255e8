// The run record every workload writes at the end of a run (summary.json), after
// google/benchmark's Run: fixed fields every run has (context, scale, batch, time, energy) plus
// the workload's parameters as text and the named counters it declares, in order. One reader,
// one set of writers and one `scaffold report` then serve every workload. This module does not
// compute a workload's counters or know their names: workloads do (e.g.
// workloads/image_classification/result_columns.hpp). Definitions and units: docs/reports.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scaffold::report {

inline constexpr const char* kSummaryFileName = "summary.json";
inline constexpr const char* kSummarySchema = "scaffold-run/1";  // the file's first key

// RunRecord::status: how the run ended.
inline constexpr const char* kStatusReachedTarget = "reached_target";  // quality target reached
inline constexpr const char* kStatusCompleted = "completed";  // the epoch budget ran out, no target
inline constexpr const char* kStatusNotReached = "not_reached";  // budget done, target missed
inline constexpr const char* kStatusTimeLimit = "time_limit";    // stopped by a wall-time limit

// The valid statuses, in the order above.
const std::vector<std::string>& run_statuses();

// One named figure a workload declares, e.g. {"images_per_s", 1234.5, "images/s", "..."}. A
// value that is not finite means "no value" (written as null, read back as NaN).
struct Counter {
  std::string name;  // snake_case with a unit suffix where it has one; unique in a record
  double value = 0;
  std::string unit;  // for people: "images/s", "J/image"; "" for a pure number or fraction
  std::string help;  // one line: what it measures and over which window
};

struct RunRecord {
  std::string workload;             // "benchmark" (ScaFFold U-Net), "image_classification", ...
  std::string status;               // one of run_statuses()
  std::string run;                  // run folder name
  std::string created_at;           // UTC ISO 8601, "2025-03-12T10:15:00Z"
  std::string system;               // SCAFFOLD_SYSTEM env, else the host name
  std::string host, job_id, queue;  // job_id/queue: SLURM_JOB_ID / SLURM_JOB_PARTITION, "" outside
  std::string scaffold_version, git_commit;
  int ranks = 1, nodes = 1, devices = 1, tasks_per_node = 1, threads_per_task = 1;
  std::string device;  // "cpu", "cuda:0"
  int64_t global_batch = 0, local_batch = 0;
  std::string precision;            // "fp32", "bf16", "tf32", "fp16"
  int64_t epochs = 0;               // timed epochs done
  int64_t warmup_epochs = 0;        // excluded from every figure (warm-up excluded by name)
  double time_s = 0;                // the timed window (sum of timed epochs)
  double runtime_s = 0;             // wall time of the whole run, set-up included
  std::optional<double> energy_wh;  // over the timed window, all measured sensors and nodes
  std::vector<std::pair<std::string, std::string>> params;  // name -> text, declaration order
  std::vector<Counter> counters;                            // declared by the workload, in order
};

// A record with the context of this process filled in: created_at (now), system
// (SCAFFOLD_SYSTEM, else the host name), host, job_id (SLURM_JOB_ID), queue
// (SLURM_JOB_PARTITION), scaffold_version and git_commit. Everything else keeps its default.
RunRecord collect_run_context();

// The JSON text of summary.json: "schema" first, then the fields in RunRecord's order, params as
// an object, counters as an array of {name, value, unit, help}; 2-space indent, final newline.
std::string run_record_json(const RunRecord& record);

// An array of records as run_record_json writes each (what `scaffold report --format json`
// prints).
std::string run_records_json(const std::vector<RunRecord>& records);

// Writes <run_dir>/summary.json atomically (temporary name, then rename). A record the reader
// would reject (an empty workload, an unknown status, a duplicate counter...) is a
// core::FileError naming the file and the key, and nothing is written.
void write_summary_json(const std::filesystem::path& run_dir, const RunRecord& record);

// Reads a summary.json. Every key is required and checked: its type, its range, no unknown or
// repeated keys, and "schema" must be kSummarySchema. An error is a core::FileError naming the
// file, the key (e.g. "counters[1].value") and what was expected.
RunRecord read_summary_json(const std::filesystem::path& path);

// The same from JSON text; `source` names it in errors.
RunRecord run_record_from_json(const std::string& text, const std::string& source);

// The counter named `name`, or nullptr.
const Counter* find_counter(const RunRecord& record, std::string_view name);
// Its value; nullopt when there is no such counter or its value is not finite.
std::optional<double> counter_value(const RunRecord& record, std::string_view name);
// The parameter named `name`, or nullptr.
const std::string* find_param(const RunRecord& record, std::string_view name);

}  // namespace scaffold::report
