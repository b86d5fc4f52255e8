#include "report/figures.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

extern char** environ;

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

// The first executable `name` in PATH, like the shell's lookup (an unset PATH means /usr/bin:/bin).
std::optional<fs::path> find_on_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  const std::string path = env ? env : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

// A gnuplot single-quoted string: no escapes are interpreted inside, and '' is one quote.
// Control characters (a newline in a title) would end the command, so they become spaces.
std::string gnuplot_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "''";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "'";
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

// Runs `gnuplot script` with stdout and stderr in `log`; returns the exit status, or throws.
int run_gnuplot(const fs::path& gnuplot, const fs::path& script, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string arg0 = gnuplot.string();
  std::string arg1 = script.string();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw core::FileError(gnuplot.string(), std::string("cannot start: ") + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw core::FileError(gnuplot.string(), "waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string log_tail(const fs::path& log) {
  std::string text;
  try {
    text = core::read_file(log);
  } catch (const core::Error&) {
    return "";
  }
  constexpr std::size_t kTail = 600;
  if (text.size() > kTail) text = "..." + text.substr(text.size() - kTail);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
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
