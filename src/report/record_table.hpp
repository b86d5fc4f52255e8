// Result tables over run records (summary.json): a workload declares its columns once, as a
// title and a function from a RunRecord to the cell's text, plus the order of its rows; the
// writers here lay any such declaration out as pretty, csv or markdown (report/text_table), and
// json prints the records themselves. Which workload has which columns is not decided here (see
// workloads/registry.cpp); the ScaFFold benchmark table keeps its own path (report/table.hpp).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "report/run_record.hpp"
#include "report/text_table.hpp"

namespace scaffold::report {

// One result column. value() returns the cell as every text format shows it (numbers already
// rounded, so csv and pretty agree); "" means no value: "-" in pretty and markdown, an empty
// field in csv.
struct Column {
  std::string title;  // the header in every format, e.g. CARAML's "Images/second"
  std::function<std::string(const RunRecord&)> value;
  Align align = Align::kRight;  // kLeft for text
};

// What a counter's value may be, when it has one.
enum class CounterRange {
  kNonNegative,  // a count, time, rate, FLOP figure, memory, energy, loss or error: >= 0
  kFraction,     // in [0, 1] (an accuracy)
};

// The range of one counter a workload writes.
struct CounterRule {
  std::string name;
  CounterRange range = CounterRange::kNonNegative;
};

// The first counter of `record` that `rules` name and whose value (when it has one) is out of its
// range is a core::FileError on `source`: key "counters[i].value" is v, expected a number >= 0
// (name). Counters the rules do not name, and counters without a value, are not checked.
void check_counters(const RunRecord& record, const std::vector<CounterRule>& rules,
                    const std::string& source);

// That a per-step CSV (`csv`) agrees with the record: its timed (non-warm-up) rows number
// record.epochs, and their time, `timed_s`, is record.time_s to a relative 1e-6. Otherwise a
// core::FileError on `csv` naming both values.
void check_timed_rows(const std::filesystem::path& csv, std::size_t timed_rows, double timed_s,
                      const RunRecord& record);

// check_timed_rows() on a workload's per-step CSV where the run folder has one: `read(csv)` gives
// its rows (and throws naming the file on a malformed one), each with a `warmup` flag;
// `seconds(row)` is a timed row's share of the record's time_s. With `compare_times` false the
// file is only read (an evaluation run's rows time no training).
template <class Read, class Seconds>
void check_step_csv(const std::filesystem::path& csv, const RunRecord& record, Read read,
                    Seconds seconds, bool compare_times = true) {
  std::error_code ec;
  if (!std::filesystem::exists(csv, ec)) return;
  std::size_t timed = 0;
  double timed_s = 0.0;
  for (const auto& row : read(csv)) {
    if (row.warmup) continue;
    ++timed;
    timed_s += seconds(row);
  }
  if (compare_times) check_timed_rows(csv, timed, timed_s, record);
}

// A workload's table: its columns and its row order.
struct WorkloadTable {
  std::string workload;  // RunRecord::workload it applies to
  std::vector<Column> columns;
  // Strict weak order of rows; equal rows (and every row when it is empty) fall back to the run
  // name, so the table does not depend on the order the folders were given in.
  std::function<bool(const RunRecord&, const RunRecord&)> less;
  // Checks a record read from <run_dir>/summary.json, and the files beside it, beyond
  // read_summary_json's rules (the workload's counter ranges, its per-step CSV); throws
  // core::FileError naming the file. Empty: nothing more is checked.
  std::function<void(const std::filesystem::path& run_dir, const RunRecord& record)> check;
};

// `x` with `decimals` digits after the point ("1234.50"); "" when there is none or it is not
// finite.
std::string fixed_text(const std::optional<double>& x, int decimals);

// What a workload's column declarations are made of (each workload's result_columns.cpp takes
// them with using-declarations).
namespace cells {
// Record parameter `name`'s text; "" when the record has none.
std::string param(const RunRecord& r, std::string_view name);
// Counter `name` times `scale`, as fixed_text() with `decimals` digits; "" when it has no value.
std::string counter(const RunRecord& r, std::string_view name, int decimals, double scale = 1.0);
// A left-aligned column of text; a right-aligned one of numbers.
Column text(std::string title, std::function<std::string(const RunRecord&)> value);
Column number(std::string title, std::function<std::string(const RunRecord&)> value);
}  // namespace cells

// The table's own rows in its order (stable: less, then run name).
void sort_records(const WorkloadTable& table, std::vector<RunRecord>& records);

// The title line above a table in `format`: "== NAME ==\n" in pretty, "### NAME\n\n" in markdown,
// "" in csv and json.
std::string workload_heading(const std::string& workload, const std::string& format);

// `records` through `table` in `format` (one of table_format_names()): sorted, headed by
// workload_heading(), then the header and one line per record; json is run_records_json() of the
// sorted records. An unknown format is a core::Error listing the valid ones.
std::string format_workload_table(const WorkloadTable& table, std::vector<RunRecord> records,
                                  const std::string& format);

}  // namespace scaffold::report
