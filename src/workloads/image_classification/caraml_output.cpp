#include "workloads/image_classification/caraml_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace scaffold::imgcls {

std::string caraml_seconds(double s) {
  const double r = std::round(s * 1000.0) / 1000.0;
  std::string text = fmt::format("{}", r);  // the shortest text that reads back as r, as repr()
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // repr(2.0) is "2.0"
  return text;
}

std::string caraml_datasets_line(double seconds) {
  return fmt::format("Creating datasets took {} s", caraml_seconds(seconds));
}

std::string caraml_starting_line(int64_t images) {
  return fmt::format("Starting training with {} images...", images);
}

std::string caraml_warmup_start_line() {
  return "Starting warm-up epochs ...";
}

std::string caraml_warmup_end_line(double seconds) {
  return fmt::format("End of warm-up epochs (took {} s)...", caraml_seconds(seconds));
}

std::string caraml_training_line(int64_t epochs, double seconds) {
  return fmt::format("Training for {} epoch(s) took {} s", epochs, caraml_seconds(seconds));
}

std::string caraml_grid_table(const std::vector<EpochRow>& rows) {
  std::vector<std::array<std::string, 3>> cells;
  int64_t timed = 0;
  const auto last_timed =
      std::count_if(rows.begin(), rows.end(), [](const EpochRow& r) { return !r.warmup; });
  for (const EpochRow& r : rows) {
    if (r.warmup) continue;
    ++timed;
    if (timed % 10 != 0 && timed != last_timed) continue;
    const double images = static_cast<double>(r.train_images + r.val_images);
    const double per_s = r.duration_s > 0 ? images / r.duration_s : 0.0;
    cells.push_back(
        {std::to_string(timed), fmt::format("{:.0f}", per_s), fmt::format("{:.3f}", r.duration_s)});
  }
  if (cells.empty()) return "";
  // tabulate's grid: numbers right-aligned, headers too; a column is as wide as its widest cell
  // and at least its header plus 2; one space of padding each side.
  const std::array<std::string, 3> headers{"Epoch", "Images/s", "Time (s)"};
  std::array<std::size_t, 3> width{};
  for (std::size_t c = 0; c < 3; ++c) {
    width[c] = headers[c].size() + 2;
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  const auto rule = [&](char fill) {
    std::string line = "+";
    for (std::size_t c = 0; c < 3; ++c) line += std::string(width[c] + 2, fill) + "+";
    return line + "\n";
  };
  const auto row_line = [&](const std::array<std::string, 3>& row) {
    std::string line = "|";
    for (std::size_t c = 0; c < 3; ++c)
      line += " " + std::string(width[c] - row[c].size(), ' ') + row[c] + " |";
    return line + "\n";
  };
  std::string out = rule('-') + row_line(headers) + rule('=');
  for (const auto& row : cells) out += row_line(row) + rule('-');
  return out;
}

std::string caraml_average_line(double mean_images_per_s) {
  return fmt::format("Average Images/s: {}", static_cast<int64_t>(std::trunc(mean_images_per_s)));
}

}  // namespace scaffold::imgcls
