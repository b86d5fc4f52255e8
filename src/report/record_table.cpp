// Run records -> one workload's table. The writers only call each column's value() and hand the
// cells to text_table's layouts, so a workload adds a column in one place and it appears in
// every format.
#include "report/record_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "report/table.hpp"

namespace scaffold::report {

namespace {

// The cells as people read them: "" (no value) becomes "-".
TextGrid human_grid(const WorkloadTable& table, const std::vector<RunRecord>& records) {
  TextGrid g;
  for (const Column& c : table.columns) {
    g.titles.push_back(c.title);
    g.align.push_back(c.align);
  }
  for (const RunRecord& r : records) {
    std::vector<std::string> line;
    for (const Column& c : table.columns) {
      std::string text = c.value(r);
      line.push_back(text.empty() ? "-" : std::move(text));
    }
    g.rows.push_back(std::move(line));
  }
  return g;
}

std::string csv(const WorkloadTable& table, const std::vector<RunRecord>& records) {
  std::vector<std::string> header;
  for (const Column& c : table.columns) header.push_back(c.title);
  std::vector<std::vector<std::string>> rows;
  for (const RunRecord& r : records) {
    rows.emplace_back();
    for (const Column& c : table.columns) rows.back().push_back(c.value(r));
  }
  return layout_csv(header, rows);
}

}  // namespace

void check_counters(const RunRecord& record, const std::vector<CounterRule>& rules,
                    const std::string& source) {
  for (std::size_t i = 0; i < record.counters.size(); ++i) {
    const Counter& c = record.counters[i];
    if (!std::isfinite(c.value)) continue;  // null: no value
    const auto rule = std::find_if(rules.begin(), rules.end(),
                                   [&](const CounterRule& r) { return r.name == c.name; });
    if (rule == rules.end()) continue;
    const bool fraction = rule->range == CounterRange::kFraction;
    if (c.value >= 0 && (!fraction || c.value <= 1)) continue;
    throw core::FileError(
        source, fmt::format("key \"counters[{}].value\" is {}, expected {} ({})", i, c.value,
                            fraction ? "a fraction in [0, 1]" : "a number >= 0", c.name));
  }
}

void check_timed_rows(const std::filesystem::path& csv, std::size_t timed_rows, double timed_s,
                      const RunRecord& record) {
  if (static_cast<int64_t>(timed_rows) != record.epochs)
    throw core::FileError(csv.string(),
                          fmt::format("holds {} timed row(s) (warm-up rows excluded), but {} has "
                                      "\"epochs\": {}: the run folder's files disagree",
                                      timed_rows, kSummaryFileName, record.epochs));
  if (std::abs(timed_s - record.time_s) > 1e-6 * std::max(1.0, std::abs(record.time_s)))
    throw core::FileError(csv.string(),
                          fmt::format("its timed rows add up to {} s, but {} has \"time_s\": "
                                      "{}: the run folder's files disagree",
                                      timed_s, kSummaryFileName, record.time_s));
}

std::string fixed_text(const std::optional<double>& x, int decimals) {
  if (!x || !std::isfinite(*x)) return "";
  return fmt::format("{:.{}f}", *x, decimals);
}

namespace cells {

std::string param(const RunRecord& r, std::string_view name) {
  const std::string* value = find_param(r, name);
  return value ? *value : "";
}

std::string counter(const RunRecord& r, std::string_view name, int decimals, double scale) {
  const std::optional<double> x = counter_value(r, name);
  return fixed_text(x ? std::optional<double>(*x * scale) : std::nullopt, decimals);
}

Column text(std::string title, std::function<std::string(const RunRecord&)> value) {
  return {std::move(title), std::move(value), Align::kLeft};
}

Column number(std::string title, std::function<std::string(const RunRecord&)> value) {
  return {std::move(title), std::move(value), Align::kRight};
}

}  // namespace cells

void sort_records(const WorkloadTable& table, std::vector<RunRecord>& records) {
  std::stable_sort(records.begin(), records.end(),
                   [&table](const RunRecord& a, const RunRecord& b) {
                     if (table.less) {
                       if (table.less(a, b)) return true;
                       if (table.less(b, a)) return false;
                     }
                     return a.run < b.run;
                   });
}

std::string workload_heading(const std::string& workload, const std::string& format) {
  if (format == "pretty") return "== " + workload + " ==\n";
  if (format == "markdown") return "### " + workload + "\n\n";
  return "";
}

std::string format_workload_table(const WorkloadTable& table, std::vector<RunRecord> records,
                                  const std::string& format) {
  sort_records(table, records);
  if (format == "pretty")
    return workload_heading(table.workload, format) + layout_pretty(human_grid(table, records));
  if (format == "markdown")
    return workload_heading(table.workload, format) + layout_markdown(human_grid(table, records));
  if (format == "csv") return csv(table, records);
  if (format == "json") return run_records_json(records);
  throw core::Error(fmt::format("unknown table format '{}'; available: {}", format,
                                fmt::join(table_format_names(), ", ")));
}

}  // namespace scaffold::report
