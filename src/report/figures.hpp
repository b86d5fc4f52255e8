// The run's three figures (docs/benchmark.md): figures/train_loss.png (overall_loss, log y),
// figures/val_dice.png and figures/val_loss.png (val_loss_avg), drawn by an external gnuplot
// rather than a plotting library linked into scaffold. Figures are a convenience: any failure,
// including no gnuplot on PATH, is one warning and `false`, never an exception.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/train_stats.hpp"

namespace scaffold::report {

// Draws the figures into <run_dir>/figures (created if needed) at 1800x1200 pixels (6x4 in at
// ScaFFold's 300 dpi). `title` is e.g. "v=64, c=5, u=3". Each PNG appears complete or not at all
// (temporary name, then rename). Returns true when all three were written. Empty `records`:
// nothing is written and false is returned without a warning.
bool write_figures(const std::filesystem::path& run_dir, const std::vector<EpochRecord>& records,
                   const std::string& title);

}  // namespace scaffold::report
