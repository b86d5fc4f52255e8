// Result tables over run records (summary.json): a workload declares its columns once, as a
// title and a function from a RunRecord to the cell's text, plus the order of its rows; the
// writers here lay any such declaration out as pretty, csv or markdown (report/text_table), and
// json prints the records themselves. Which workload has which columns is not decided here (see
// suite/result_tables.hpp); the ScaFFold benchmark table keeps its own path (report/table.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
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

// A workload's table: its columns and its row order.
struct WorkloadTable {
  std::string workload;  // RunRecord::workload it applies to
  std::vector<Column> columns;
  // Strict weak order of rows; equal rows (and every row when it is empty) fall back to the run
  // name, so the table does not depend on the order the folders were given in.
  std::function<bool(const RunRecord&, const RunRecord&)> less;
};

// `x` with `decimals` digits after the point ("1234.50"); "" when there is none or it is not
// finite.
std::string fixed_text(const std::optional<double>& x, int decimals);

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
