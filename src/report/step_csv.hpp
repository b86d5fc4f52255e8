// A strict reader for the workloads' per-step CSV files (epoch_stats.csv, iteration_stats.csv):
// the header must be the expected one exactly, every row must have its columns, and every cell
// must parse whole (no "1.5x", no blank) and keep its column's range. Each error is one
// core::FileError naming the file, the line, the column and what was expected. The workloads
// declare their columns and rules; this module knows none of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace scaffold::report
