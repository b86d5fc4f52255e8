#include "report/figures.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "report/gnuplot.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

struct Plot {
  const char* file_name;
  double (*value)(const EpochRecord&);
  const char* y_label;
  bool log_y;
};

// Plot i is column i + 2 of the data file; column 1 is the epoch.
constexpr std::array<Plot, 3> kPlots{{
    {"train_loss.png", [](const EpochRecord& r) { return r.overall_loss; },
     "train loss (mean per sample)", true},
    {"val_dice.png", [](const EpochRecord& r) { return r.val_dice; }, "validation Dice", false},
    {"val_loss.png", [](const EpochRecord& r) { return r.val_loss_avg; },
     "validation loss (mean per sample)", false},
}};

// One warning per process: figures are drawn at the end of every run, and a machine without
// gnuplot should say so once, not on every call.
void warn_once(const std::string& message) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) LOG_WARN("figures not written: {}", message);
}

// Non-finite values (a diverged epoch) are gaps in the line rather than a failed plot.
std::string data_value(double value) {
  return std::isfinite(value) ? fmt::format("{:.17g}", value) : "?";
}

// A private folder under TMPDIR for the data file, the script and gnuplot's log; removed on
// destruction whatever happens.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "scaffold-figures-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw core::FileError(pattern,
                            std::string("cannot create temporary folder: ") + std::strerror(errno));
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string make_data(const std::vector<EpochRecord>& records) {
  std::string data;
  for (const EpochRecord& r : records) {
    data += std::to_string(r.epoch);
    for (const Plot& plot : kPlots) data += " " + data_value(plot.value(r));
    data += "\n";
  }
  return data;
}

std::string make_script(const std::vector<EpochRecord>& records, const std::string& title,
                        const fs::path& data_file, const std::vector<fs::path>& outputs) {
  // pngcairo draws anti-aliased lines and finds fonts through fontconfig; plain png (libgd) is
  // the fallback on gnuplot builds without cairo. Fonts and lines are scaled up from gnuplot's
  // defaults, which are sized for 640x480, so the labels stay readable at 1800x1200.
  std::string script =
      "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
      "  set terminal pngcairo size 1800,1200 font 'sans,28' linewidth 3 noenhanced\n"
      "} else {\n"
      "  set terminal png size 1800,1200 font 'sans,28' linewidth 3 noenhanced\n"
      "}\n"
      "set datafile missing '?'\n"
      "set grid\n"
      "set key off\n"
      "set xlabel 'epoch'\n";
  script += "set title " + gnuplot_quote(title) + "\n";
  // An explicit x range: gnuplot's autoscale fails outright ("x range is invalid") on a
  // series with no finite value, and warns on a single epoch.
  const auto [lo, hi] = std::minmax_element(
      records.begin(), records.end(),
      [](const EpochRecord& a, const EpochRecord& b) { return a.epoch < b.epoch; });
  if (lo->epoch == hi->epoch) {
    script += fmt::format("set xrange [{}:{}]\n", lo->epoch - 1, hi->epoch + 1);
  } else {
    script += fmt::format("set xrange [{}:{}]\n", lo->epoch, hi->epoch);
  }
  // Integer epoch ticks while they fit; gnuplot's automatic ticks would show 1.5 etc.
  if (hi->epoch - lo->epoch <= 20) script += "set xtics 1\n";
  for (std::size_t i = 0; i < kPlots.size(); ++i) {
    const Plot& plot = kPlots[i];
    const auto finite = [&plot](const EpochRecord& r) { return std::isfinite(plot.value(r)); };
    // A log axis needs positive values; a zero or negative loss falls back to a linear axis.
    const bool log_y =
        plot.log_y && std::all_of(records.begin(), records.end(), [&](const EpochRecord& r) {
          return !finite(r) || plot.value(r) > 0.0;
        });
    script += log_y ? "set logscale y\n" : "unset logscale y\n";
    // Nothing to plot (every epoch diverged): a fixed range gives an empty, labelled figure.
    script += std::any_of(records.begin(), records.end(), finite) ? "set autoscale y\n"
                                                                  : "set yrange [0:1]\n";
    script += fmt::format("set ylabel {}\n", gnuplot_quote(plot.y_label));
    script += "set output " + gnuplot_quote(outputs[i].string()) + "\n";
    script += fmt::format("plot {} using 1:{} with linespoints pointtype 7 pointsize 1.5\n",
                          gnuplot_quote(data_file.string()), i + 2);
  }
  return script + "unset output\n";
}

}  // namespace

bool write_figures(const fs::path& run_dir, const std::vector<EpochRecord>& records,
                   const std::string& title) {
  if (records.empty()) return false;
  std::vector<fs::path> outputs;  // temporary PNG names next to the final ones
  const auto remove_outputs = [&outputs] {
    std::error_code ec;
    for (const fs::path& p : outputs) fs::remove(p, ec);
  };
  try {
    const std::optional<fs::path> gnuplot = find_on_path("gnuplot");
    if (!gnuplot) {
      warn_once("no gnuplot on PATH (install gnuplot, e.g. the gnuplot-nox package)");
      return false;
    }
    const fs::path figures = run_dir / "figures";
    core::create_directories(figures);
    TempFolder tmp;
    for (const Plot& plot : kPlots)
      outputs.push_back(core::temporary_sibling(figures / plot.file_name));
    const fs::path data_file = tmp.path() / "epochs.dat";
    const fs::path script_file = tmp.path() / "figures.gp";
    const fs::path log_file = tmp.path() / "gnuplot.log";
    core::write_file_atomic(data_file, make_data(records));
    core::write_file_atomic(script_file, make_script(records, title, data_file, outputs));
    const int status = run_gnuplot(*gnuplot, script_file, log_file);
    if (status != 0) {
      remove_outputs();
      warn_once(fmt::format("{} exited with status {}: {}", gnuplot->string(), status,
                            log_tail(log_file)));
      return false;
    }
    for (std::size_t i = 0; i < kPlots.size(); ++i) {
      std::error_code ec;
      if (fs::file_size(outputs[i], ec) == 0 || ec)
        throw core::FileError(outputs[i].string(), "gnuplot wrote no image");
    }
    for (std::size_t i = 0; i < kPlots.size(); ++i)
      fs::rename(outputs[i], figures / kPlots[i].file_name);
    return true;
  } catch (const std::exception& e) {
    remove_outputs();
    warn_once(e.what());
    return false;
  }
}

}  // namespace scaffold::report
