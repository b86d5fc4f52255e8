// Lays out a grid of finished cell texts as the three text formats every result table shares:
// pretty (aligned, two spaces between columns, a rule of dashes), a GitHub Markdown pipe table,
// and CSV (RFC 4180 quoting). It knows nothing about runs or numbers: callers turn their records
// into cells (report/table.cpp for ScaFFold runs, report/record_table.cpp for RunRecords).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/pyfloat.hpp"

namespace scaffold::report {

enum class Align { kLeft, kRight };  // text left, numbers right

// One table as people read it: a title and an alignment per column, and each row's cells.
struct TextGrid {
  std::vector<std::string> titles;
  std::vector<Align> align;                    // one per title
  std::vector<std::vector<std::string>> rows;  // one cell per title in each row
};

// Aligned columns two spaces apart, a rule of dashes under the titles, trailing blanks trimmed;
// every line ends with a newline. Column widths count the title and every cell.
std::string layout_pretty(const TextGrid& grid);

// A pipe table with the same widths; `|` in a cell is escaped (titles are taken as they are),
// the rule marks each column's alignment (":---" left, "---:" right).
std::string layout_markdown(const TextGrid& grid);

// One CSV field: quoted (with doubled quotes) only when it holds a comma, quote, CR or LF.
using core::csv_field;

// A header line and one line per row, fields through csv_field, each line ending in '\n'.
std::string layout_csv(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows);

}  // namespace scaffold::report
