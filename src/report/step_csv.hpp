// The workloads' per-step CSV files (epoch_stats.csv, iteration_stats.csv), declared once per
// file as StepCsvColumns: each column's name, writer and reader, from which the header, every
// line and the strict reader follow, so the three cannot drift apart. The reader: the header
// must be the expected one exactly, every row must have its columns, and every cell must parse
// whole (no "1.5x", no blank) and keep its column's range. Each error is one core::FileError
// naming the file, the line, the column and what was expected. The workloads declare their
// columns and rules; this module knows none of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/pyfloat.hpp"

namespace scaffold::report {

// What a number in a column may be.
enum class NumberRange {
  kAny,          // any number, nan and inf included (a loss of a diverged step)
  kNotNegative,  // >= 0, or nan or inf (a norm or an error that overflowed or had no value)
  kFinite,       // a finite number >= 0 (times, rates, learning rates)
  kPositive,     // a finite number > 0 (a loss scale)
  kFraction,     // in [0, 1], or nan (an accuracy without examples)
};

// "a finite number >= 0" etc., as the errors say it.
std::string describe(NumberRange range);
// True when `x` keeps `range`.
bool in_range(double x, NumberRange range);

// One data row of a per-step CSV, its cells split at commas.
class StepCsvRow {
 public:
  StepCsvRow(const std::string& file, std::size_t line, std::string_view text,
             const std::vector<std::string>& columns);

  // The cell of `column` (an index into the header's columns) as it is.
  std::string_view text(std::size_t column) const { return cells_.at(column); }
  // The cell of `column` (an index into the header's columns) as an integer >= `min`.
  int64_t integer(std::size_t column, int64_t min = 0) const;
  // The cell as 0 or 1.
  bool flag(std::size_t column) const;
  // The cell as a number in `range`.
  double number(std::size_t column, NumberRange range) const;
  // A core::FileError naming the file and the line: "line N: what ('row text')".
  [[noreturn]] void fail(const std::string& what) const;
  std::size_t line() const { return line_; }

 private:
  [[noreturn]] void bad_cell(std::size_t column, const std::string& expected) const;

  const std::string& file_;
  std::size_t line_;  // 1-based
  std::string_view text_;
  const std::vector<std::string>& columns_;
  std::vector<std::string_view> cells_;
};

// Reads `path`: its first line must be `columns` joined by commas; then calls `on_row` for every
// non-empty line. A trailing '\r' is ignored. Throws core::FileError naming the file (and line).
void read_step_csv(const std::filesystem::path& path, const std::vector<std::string>& columns,
                   const std::function<void(const StepCsvRow&)>& on_row);

// `columns` joined by commas.
std::string step_csv_header(const std::vector<std::string>& columns);

// One column, declared once: its name, how a row's value is written, and how its cell is read
// back into a row (or checked against the columns read before it, for a derived column).
template <class Row>
struct StepCsvColumn {
  std::string name;
  std::function<std::string(const Row&)> write;
  std::function<void(const StepCsvRow& cells, std::size_t index, Row& row)> read;
};

// An integer column (>= min), a 0/1 flag column, and a number column kept in `range`, written as
// Python's str() writes floats (1.0, 0.1, 1e-05, nan): the usual columns, bound to a member.
template <class Row>
StepCsvColumn<Row> integer_column(std::string name, int64_t Row::*member, int64_t min = 0) {
  return {
      std::move(name), [member](const Row& r) { return std::to_string(r.*member); },
      [member, min](const StepCsvRow& c, std::size_t i, Row& r) { r.*member = c.integer(i, min); }};
}
template <class Row>
StepCsvColumn<Row> flag_column(std::string name, bool Row::*member) {
  return {std::move(name), [member](const Row& r) { return std::string(r.*member ? "1" : "0"); },
          [member](const StepCsvRow& c, std::size_t i, Row& r) { r.*member = c.flag(i); }};
}
template <class Row>
StepCsvColumn<Row> number_column(std::string name, double Row::*member, NumberRange range) {
  return {std::move(name), [member](const Row& r) { return core::python_float_str(r.*member); },
          [member, range](const StepCsvRow& c, std::size_t i, Row& r) {
            r.*member = c.number(i, range);
          }};
}

// The usual rule of a per-epoch file: the epoch goes up by one from row to row.
template <class Row>
std::function<void(const StepCsvRow&, const Row&, const std::vector<Row>&)> epochs_follow(
    int64_t Row::*epoch) {
  return [epoch](const StepCsvRow& cells, const Row& r, const std::vector<Row>& before) {
    if (!before.empty() && r.*epoch != before.back().*epoch + 1)
      cells.fail("epoch " + std::to_string(r.*epoch) + " after epoch " +
                 std::to_string(before.back().*epoch) + " (epochs must follow each other)");
  };
}

// A file's columns in order, and the rule across rows (`check`: called for each row read, with
// the rows before it; it calls cells.fail for a row that breaks it).
template <class Row>
class StepCsvColumns {
 public:
  using Check =
      std::function<void(const StepCsvRow& cells, const Row& row, const std::vector<Row>& before)>;

  explicit StepCsvColumns(std::vector<StepCsvColumn<Row>> columns, Check check = {})
      : columns_(std::move(columns)), check_(std::move(check)) {
    for (const auto& c : columns_) names_.push_back(c.name);
  }

  const std::vector<std::string>& names() const { return names_; }
  std::string header() const { return step_csv_header(names_); }
  std::string line(const Row& row) const {
    std::string out;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      if (i > 0) out += ',';
      out += columns_[i].write(row);
    }
    return out;
  }
  // The rows of `path` (read_step_csv's checks, each column's, then `check`).
  std::vector<Row> read(const std::filesystem::path& path) const {
    std::vector<Row> rows;
    read_step_csv(path, names_, [&](const StepCsvRow& cells) {
      Row row;
      for (std::size_t i = 0; i < columns_.size(); ++i) columns_[i].read(cells, i, row);
      if (check_) check_(cells, row, rows);
      rows.push_back(std::move(row));
    });
    return rows;
  }

 private:
  std::vector<StepCsvColumn<Row>> columns_;
  Check check_;
  std::vector<std::string> names_;
};

}  // namespace scaffold::report
