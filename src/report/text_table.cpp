// Pretty, Markdown and CSV layout of a grid of cell texts. Widths are measured in bytes, which is
// right for the ASCII the tables hold (run names, numbers, units).
#include "report/text_table.hpp"

#include <algorithm>

namespace scaffold::report {

namespace {

std::string pad(const std::string& text, std::size_t width, Align align) {
  const std::string fill(width > text.size() ? width - text.size() : 0, ' ');
  return align == Align::kLeft ? text + fill : fill + text;
}

std::string rstrip(std::string line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n')) line.pop_back();
  return line;
}

// Markdown cells: a '|' would end the cell.
std::string markdown_escaped(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// Each column's width: its title and its widest cell.
std::vector<std::size_t> widths(const std::vector<std::string>& titles,
                                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w;
  w.reserve(titles.size());
  for (const std::string& t : titles) w.push_back(t.size());
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < w.size(); ++i)
      w[i] = std::max(w[i], row[i].size());
  return w;
}

}  // namespace

std::string layout_pretty(const TextGrid& grid) {
  const std::vector<std::size_t> w = widths(grid.titles, grid.rows);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size(); ++i)
      out += (i ? "  " : "") + pad(cells[i], w[i], grid.align[i]);
    return rstrip(out) + "\n";
  };
  std::vector<std::string> rules;
  rules.reserve(w.size());
  for (std::size_t width : w) rules.emplace_back(width, '-');
  std::string out = line(grid.titles) + line(rules);
  for (const auto& cells : grid.rows) out += line(cells);
  return out;
}

std::string layout_markdown(const TextGrid& grid) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& cells : grid.rows) {
    rows.emplace_back();
    for (const std::string& c : cells) rows.back().push_back(markdown_escaped(c));
  }
  const std::vector<std::size_t> w = widths(grid.titles, rows);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t i = 0; i < cells.size(); ++i)
      out += " " + pad(cells[i], w[i], grid.align[i]) + " |";
    return out + "\n";
  };
  std::string rule = "|";
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::string dashes(w[i] + 1, '-');
    rule += (grid.align[i] == Align::kLeft ? ":" + dashes : dashes + ":") + "|";
  }
  std::string out = line(grid.titles) + rule + "\n";
  for (const auto& cells : rows) out += line(cells);
  return out;
}

std::string layout_csv(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows) {
  const auto line = [](const std::vector<std::string>& fields) {
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& fields : rows) out += line(fields);
  return out;
}

}  // namespace scaffold::report
