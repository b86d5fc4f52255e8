#include "report/step_csv.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::report {
namespace {

// A cell as the errors show it: quoted, cut short when long.
std::string shown(std::string_view cell) {
  if (cell.size() > 40) return fmt::format("'{}...'", cell.substr(0, 37));
  return fmt::format("'{}'", cell);
}

}  // namespace

std::string describe(NumberRange range) {
  switch (range) {
    case NumberRange::kAny:
      return "a number";
    case NumberRange::kNotNegative:
      return "a number >= 0 (or nan or inf)";
    case NumberRange::kFinite:
      return "a finite number >= 0";
    case NumberRange::kPositive:
      return "a finite number > 0";
    case NumberRange::kFraction:
      return "a fraction in [0, 1] (or nan)";
  }
  return "";
}

bool in_range(double x, NumberRange range) {
  switch (range) {
    case NumberRange::kAny:
      return true;
    case NumberRange::kNotNegative:
      return std::isnan(x) || x >= 0;
    case NumberRange::kFinite:
      return std::isfinite(x) && x >= 0;
    case NumberRange::kPositive:
      return std::isfinite(x) && x > 0;
    case NumberRange::kFraction:
      return std::isnan(x) || (x >= 0 && x <= 1);
  }
  return false;
}

StepCsvRow::StepCsvRow(const std::string& file, std::size_t line, std::string_view text,
                       const std::vector<std::string>& columns)
    : file_(file), line_(line), text_(text), columns_(columns) {
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    cells_.push_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (cells_.size() != columns_.size())
    fail(fmt::format("expected {} columns, found {}", columns_.size(), cells_.size()));
}

void StepCsvRow::fail(const std::string& what) const {
  const std::string row =
      text_.size() > 200 ? std::string(text_.substr(0, 197)) + "..." : std::string(text_);
  throw core::FileError(file_, fmt::format("line {}: {} ('{}')", line_, what, row));
}

void StepCsvRow::bad_cell(std::size_t column, const std::string& expected) const {
  fail(fmt::format("column {} is {}, expected {}", columns_[column], shown(cells_[column]),
                   expected));
}

int64_t StepCsvRow::integer(std::size_t column, int64_t min) const {
  const std::string_view cell = cells_[column];
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), x);
  const std::string expected = fmt::format("an integer >= {}", min);
  if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size() || x < min)
    bad_cell(column, expected);
  return x;
}

bool StepCsvRow::flag(std::size_t column) const {
  const std::string_view cell = cells_[column];
  if (cell != "0" && cell != "1") bad_cell(column, "0 or 1");
  return cell == "1";
}

double StepCsvRow::number(std::size_t column, NumberRange range) const {
  const std::string_view cell = cells_[column];
  double x = 0;
  // from_chars reads what Python's str() writes, nan and inf included; it refuses a leading '+'
  // or blank, and the end check refuses trailing text.
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), x);
  if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size() || !in_range(x, range))
    bad_cell(column, describe(range));
  return x;
}

std::string step_csv_header(const std::vector<std::string>& columns) {
  std::string header;
  for (const std::string& c : columns) header += (header.empty() ? "" : ",") + c;
  return header;
}

void read_step_csv(const std::filesystem::path& path, const std::vector<std::string>& columns,
                   const std::function<void(const StepCsvRow&)>& on_row) {
  const std::string file = path.string();
  const std::string text = core::read_file(path);
  const std::string header = step_csv_header(columns);
  std::size_t start = 0;
  for (std::size_t line = 1; start < text.size(); ++line) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view row(text.data() + start, end - start);
    start = end + 1;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (line == 1) {
      if (row != header)
        throw core::FileError(
            file, fmt::format("line 1: the header is {}, expected '{}'", shown(row), header));
      continue;
    }
    if (row.empty()) continue;
    on_row(StepCsvRow(file, line, row, columns));
  }
  if (text.empty())
    throw core::FileError(file, fmt::format("empty, expected the header '{}'", header));
}

}  // namespace scaffold::report
