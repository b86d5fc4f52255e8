// Run folders -> RunSummary records -> one table. The columns are declared once (kColumns) with
// a key for CSV/JSON (unit suffixes), a title for people (units in brackets) and how to format
// a number for people; each writer only lays them out. Machine formats (csv, json) carry every
// number at full precision; pretty and markdown round them and mark lower bounds with '>'.
#include "report/table.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>
#include <variant>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "report/gnuplot.hpp"
#include "report/run_record.hpp"
#include "report/text_table.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

template <typename T>
bool parse_number(std::string_view s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// ------------------------------------------------------------------------------- columns

using Value = std::variant<std::monostate, std::string, int64_t, bool, double>;

struct Cell {
  Value value;               // monostate: no value ("-" for people, empty in CSV, null in JSON)
  bool lower_bound = false;  // people see '>' in front: the run stopped before the target
};

struct Column {
  const char* key;     // CSV header and JSON key
  const char* title;   // pretty and Markdown header; "" = machine formats only
  const char* number;  // fmt spec for a double shown to people
  bool left;           // left-aligned for people (text); numbers are right-aligned
  Cell (*cell)(const RunSummary&);
};

Cell maybe(const std::optional<double>& x, bool lower_bound = false) {
  return x ? Cell{*x, lower_bound} : Cell{};
}

// The one declaration of the table's columns, in order.
const std::array<Column, 15> kColumns{{
    {"run", "run", "", true, [](const RunSummary& r) { return Cell{r.run}; }},
    {"problem_scale", "scale", "", false,
     [](const RunSummary& r) { return Cell{int64_t{r.problem_scale}}; }},
    {"ranks", "ranks", "", false, [](const RunSummary& r) { return Cell{int64_t{r.ranks}}; }},
    {"shards", "shards", "", false, [](const RunSummary& r) { return Cell{int64_t{r.shards}}; }},
    {"global_batch", "global batch", "", false,
     [](const RunSummary& r) { return Cell{r.global_batch}; }},
    {"epochs", "epochs", "", false, [](const RunSummary& r) { return Cell{r.epochs}; }},
    // People read the marker instead; machines get the flag.
    {"reached_target", "", "", false, [](const RunSummary& r) { return Cell{r.reached_target}; }},
    {"time_to_target_s", "time to target [s]", "{:.2f}", false,
     [](const RunSummary& r) {
       return Cell{r.time_to_target_s, !r.reached_target};
     }},
    {"fom_per_s", "FOM [1/s]", "{:.4g}", false,
     [](const RunSummary& r) { return maybe(r.fom_per_s); }},
    {"median_epoch_s", "median epoch [s]", "{:.2f}", false,
     [](const RunSummary& r) { return maybe(r.median_epoch_s); }},
    {"samples_per_s", "samples/s", "{:.2f}", false,
     [](const RunSummary& r) { return maybe(r.samples_per_s); }},
    {"energy_to_target_wh", "energy to target [Wh]", "{:.3f}", false,
     [](const RunSummary& r) { return maybe(r.energy_to_target_wh, !r.reached_target); }},
    {"samples_per_wh", "samples/Wh", "{:.1f}", false,
     [](const RunSummary& r) { return maybe(r.samples_per_wh); }},
    {"status", "status", "", true,
     [](const RunSummary& r) { return r.status.empty() ? Cell{} : Cell{r.status}; }},
    // Machines get the mode here (last, so the columns before keep their places); people read
    // it in the shards cell of a sharded run (human_cell).
    {"dc_groupnorm", "", "", false,
     [](const RunSummary& r) { return r.dc_groupnorm.empty() ? Cell{} : Cell{r.dc_groupnorm}; }},
}};

constexpr const char* kNotReachedNote =
    "> target_dice not reached: time and energy are the whole run's (a lower bound), and there is "
    "no FOM.";
constexpr const char* kTimeLimitNote =
    "> time_limit: stopped by the scheduler's signal before its time limit; the files are complete "
    "up to the last epoch, and restart.sh in the run folder resumes the run.";

std::string human_text(const Column& column, const Cell& cell) {
  std::string text;
  if (std::holds_alternative<std::monostate>(cell.value)) return "-";
  if (const auto* s = std::get_if<std::string>(&cell.value)) text = *s;
  if (const auto* i = std::get_if<int64_t>(&cell.value)) text = std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&cell.value)) text = *b ? "yes" : "no";
  if (const auto* d = std::get_if<double>(&cell.value))
    text = fmt::format(fmt::runtime(column.number), *d);
  return cell.lower_bound ? ">" + text : text;
}

// Unquoted: layout_csv quotes the fields that need it.
std::string csv_text(const Cell& cell) {
  if (const auto* s = std::get_if<std::string>(&cell.value)) return *s;
  if (const auto* i = std::get_if<int64_t>(&cell.value)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&cell.value)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&cell.value)) return core::python_float_str(*d);
  return "";
}

nlohmann::ordered_json json_value(const Cell& cell) {
  if (const auto* s = std::get_if<std::string>(&cell.value)) return *s;
  if (const auto* i = std::get_if<int64_t>(&cell.value)) return *i;
  if (const auto* b = std::get_if<bool>(&cell.value)) return *b;
  if (const auto* d = std::get_if<double>(&cell.value)) return *d;  // non-finite dumps as null
  return nullptr;
}

std::vector<const Column*> human_columns() {
  std::vector<const Column*> out;
  for (const Column& c : kColumns)
    if (*c.title != '\0') out.push_back(&c);
  return out;
}

bool any_not_reached(const std::vector<RunSummary>& rows) {
  return std::any_of(rows.begin(), rows.end(),
                     [](const RunSummary& r) { return !r.reached_target; });
}

// A cell as people read it: a sharded run's shard count says whose GroupNorm statistics it used
// ("2 (local GN)": per shard, as ScaFFold; "global": the sharded model equals the unsharded one).
std::string human_cell(const Column& column, const RunSummary& r) {
  std::string text = human_text(column, column.cell(r));
  if (std::string_view(column.key) == "shards" && !r.dc_groupnorm.empty())
    text += " (" + r.dc_groupnorm + " GN)";
  return text;
}

// The columns people see (those with a title) and each row's cells as people read them.
TextGrid human_grid(const std::vector<RunSummary>& rows) {
  TextGrid g;
  const std::vector<const Column*> columns = human_columns();
  for (const Column* c : columns) {
    g.titles.emplace_back(c->title);
    g.align.push_back(c->left ? Align::kLeft : Align::kRight);
  }
  for (const RunSummary& r : rows) {
    std::vector<std::string> line;
    line.reserve(columns.size());
    for (const Column* c : columns) line.push_back(human_cell(*c, r));
    g.rows.push_back(std::move(line));
  }
  return g;
}

std::string with_note(std::string table, const std::vector<RunSummary>& rows) {
  if (any_not_reached(rows)) table += std::string("\n") + kNotReachedNote + "\n";
  if (std::any_of(rows.begin(), rows.end(),
                  [](const RunSummary& r) { return r.status == kStatusTimeLimit; }))
    table += std::string(any_not_reached(rows) ? "" : "\n") + kTimeLimitNote + "\n";
  return table;
}

// ------------------------------------------------------------------------------- writers

std::string write_pretty(const std::vector<RunSummary>& rows) {
  return with_note(layout_pretty(human_grid(rows)), rows);
}

std::string write_markdown(const std::vector<RunSummary>& rows) {
  return with_note(layout_markdown(human_grid(rows)), rows);
}

std::string write_csv(const std::vector<RunSummary>& rows) {
  std::vector<std::string> header;
  header.reserve(std::size(kColumns));
  for (const Column& c : kColumns) header.emplace_back(c.key);
  std::vector<std::vector<std::string>> lines;
  for (const RunSummary& r : rows) {
    lines.emplace_back();
    for (const Column& c : kColumns) lines.back().push_back(csv_text(c.cell(r)));
  }
  return layout_csv(header, lines);
}

std::string write_json(const std::vector<RunSummary>& rows) {
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const RunSummary& r : rows) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    for (const Column& c : kColumns) row[c.key] = json_value(c.cell(r));
    runs.push_back(std::move(row));
  }
  return runs.dump(2) + "\n";
}

struct Writer {
  const char* name;
  std::string (*write)(const std::vector<RunSummary>&);
};

const std::array<Writer, 4> kWriters{{
    {"pretty", write_pretty},
    {"csv", write_csv},
    {"markdown", write_markdown},
    {"json", write_json},
}};

// ---------------------------------------------------------------------------- gnuplot

// Removes its paths on destruction, whatever happens.
struct Cleanup {
  std::vector<fs::path> paths;
  ~Cleanup() {
    std::error_code ec;
    for (const fs::path& p : paths) fs::remove_all(p, ec);
  }
};

std::string rstrip(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  return text;
}

std::string plot_value(const std::optional<double>& x) {
  return x && std::isfinite(*x) ? fmt::format("{:.17g}", *x) : "?";
}

}  // namespace

// ------------------------------------------------------------------------ reading runs

namespace {

// The folder's own name: "runs/x/" normalises to "runs/x/" with an empty filename.
std::string folder_name(const fs::path& run_dir) {
  const fs::path normal = fs::absolute(run_dir).lexically_normal();
  const std::string name = normal.filename().string();
  return name.empty() ? normal.parent_path().filename().string() : name;
}

}  // namespace

RunData read_run_folder(const fs::path& run_dir, const RunConfigReader& read_config) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec))
    throw core::FileError(run_dir.string(),
                          fs::exists(run_dir, ec) ? "not a folder" : "no such folder");
  for (const char* required : {"config.yaml", kTrainStatsFileName})
    if (!fs::is_regular_file(run_dir / required, ec))
      throw core::FileError(
          run_dir.string(),
          fmt::format("not a run folder: it has no {} (a `scaffold benchmark` run folder holds "
                      "config.yaml and train_stats.csv; every other workload's holds summary.json)",
                      required));
  RunData run;
  run.name = folder_name(run_dir);
  const fs::path config = run_dir / "config.yaml";
  run.config = read_config(core::read_file(config), config.string());
  run.epochs = read_train_stats(run_dir / kTrainStatsFileName);
  if (fs::exists(run_dir / kEnergyStatsFileName, ec))
    run.energy = read_energy_stats(run_dir / kEnergyStatsFileName);
  if (fs::exists(run_dir / kSystemInfoFileName, ec))
    run.system = read_system_json(run_dir / kSystemInfoFileName);
  if (fs::exists(run_dir / kSummaryFileName, ec))
    run.status = read_summary_json(run_dir / kSummaryFileName).status;
  return run;
}

// ----------------------------------------------------------------------------- summary

std::optional<RunSummary> summarize_record(const RunRecord& record, const fs::path& run_dir) {
  const std::string source = (run_dir / kSummaryFileName).string();
  const std::optional<double> samples = counter_value(record, "training_samples");
  const std::optional<double> median_epoch = counter_value(record, "median_epoch_s");
  const std::string* shards = find_param(record, "shards");
  if (!samples || !shards) return std::nullopt;  // written before these were recorded
  const auto param = [&](const char* name) -> const std::string& {
    const std::string* p = find_param(record, name);
    if (p == nullptr)
      throw core::FileError(source, fmt::format("a benchmark record without parameter {}", name));
    return *p;
  };
  const auto int_param = [&](const char* name) {
    const std::string& text = param(name);
    int value = 0;
    if (!parse_number(text, &value) || value < 1)
      throw core::FileError(
          source, fmt::format("parameter {} is \"{}\"; expected an integer >= 1", name, text));
    return value;
  };
  RunSummary s;
  s.run = folder_name(run_dir);
  s.problem_scale = int_param("problem_scale");
  s.ranks = record.ranks;
  s.shards = int_param("shards");
  if (s.shards > 1) s.dc_groupnorm = param("dc_groupnorm");
  s.global_batch = record.global_batch;
  s.epochs = record.epochs;
  s.status = record.status;
  s.reached_target = record.status == kStatusReachedTarget;
  s.time_to_target_s = record.time_s;
  s.training_samples = static_cast<int64_t>(std::llround(*samples));
  if (s.epochs > 0 && median_epoch) s.median_epoch_s = *median_epoch;
  if (s.reached_target && s.time_to_target_s > 0) s.fom_per_s = 1.0 / s.time_to_target_s;
  if (s.time_to_target_s > 0)
    s.samples_per_s = static_cast<double>(s.training_samples) / s.time_to_target_s;
  if (record.energy_wh) {
    s.energy_to_target_wh = *record.energy_wh;
    if (*record.energy_wh > 0)
      s.samples_per_wh = static_cast<double>(s.training_samples) / *record.energy_wh;
  }
  return s;
}

RunSummary summarize_run(const RunData& run) {
  RunSummary s;
  s.run = run.name;
  s.problem_scale = run.config.problem_scale;
  s.ranks = run.system ? run.system->world_size : 1;
  // The shards the run really used are in system.json; config.yaml says what was asked for.
  const std::vector<int>& shards = run.system && !run.system->dc_num_shards.empty()
                                       ? run.system->dc_num_shards
                                       : run.config.dc_num_shards;
  s.shards = 1;
  for (int n : shards) s.shards *= n;
  // config.yaml of a run from before the key: global, then the only mode.
  if (s.shards > 1)
    s.dc_groupnorm = run.config.dc_groupnorm.empty() ? "global" : run.config.dc_groupnorm;
  // Each sample is split over `shards` ranks, so ranks / shards replicas each take a local batch.
  const int replicas = std::max(1, s.shards > 0 ? s.ranks / s.shards : 1);
  s.global_batch = int64_t{run.config.local_batch_size} * replicas;

  std::vector<double> durations;
  for (const EpochRecord& r : run.epochs) {
    s.time_to_target_s += r.epoch_duration_s;
    s.training_samples += r.optimizer_steps * s.global_batch;
    durations.push_back(r.epoch_duration_s);
  }
  if (!run.epochs.empty()) {
    s.epochs = run.epochs.back().epoch;
    s.reached_target = run.epochs.back().val_dice >= run.config.target_dice;
    s.median_epoch_s = core::median(durations);
  }
  s.status = run.status ? *run.status : s.reached_target ? kStatusReachedTarget : kStatusNotReached;
  if (s.reached_target && s.time_to_target_s > 0) s.fom_per_s = 1.0 / s.time_to_target_s;
  if (s.time_to_target_s > 0)
    s.samples_per_s = static_cast<double>(s.training_samples) / s.time_to_target_s;

  if (run.energy) {
    // Warm-up is excluded by name: it is not part of the timed training either.
    bool any = false;
    double wh = 0.0;
    for (const EnergyWindowRecord& w : *run.energy) {
      if (w.window != "train" && w.window != "validation") continue;
      any = true;
      wh += w.energy_wh;
    }
    if (any) s.energy_to_target_wh = wh;
    if (any && wh > 0) s.samples_per_wh = static_cast<double>(s.training_samples) / wh;
  }
  return s;
}

void sort_for_scaling(std::vector<RunSummary>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const RunSummary& a, const RunSummary& b) {
    return std::tie(a.problem_scale, a.ranks, a.run) < std::tie(b.problem_scale, b.ranks, b.run);
  });
}

// ------------------------------------------------------------------------------ output

std::vector<std::string> table_format_names() {
  std::vector<std::string> names;
  names.reserve(std::size(kWriters));
  for (const Writer& w : kWriters) names.emplace_back(w.name);
  return names;
}

std::string format_table(const std::vector<RunSummary>& rows, const std::string& format) {
  for (const Writer& w : kWriters)
    if (format == w.name) return w.write(rows);
  throw core::Error(fmt::format("unknown table format '{}'; available: {}", format,
                                fmt::join(table_format_names(), ", ")));
}

void write_scaling_plot(const fs::path& png, const std::vector<RunSummary>& rows) {
  if (rows.empty()) throw core::Error("--plot: no runs to plot");
  const std::optional<fs::path> gnuplot = find_on_path("gnuplot");
  if (!gnuplot)
    throw core::Error(
        fmt::format("--plot {}: no gnuplot on PATH (install gnuplot, e.g. the "
                    "gnuplot-nox package, or leave out --plot)",
                    png.string()));
  const fs::path out_dir = png.parent_path().empty() ? fs::path(".") : png.parent_path();
  core::create_directories(out_dir);

  // One data block per problem scale (gnuplot's `index`): ranks, time, reached, energy.
  std::map<int, std::vector<const RunSummary*>> by_scale;
  for (const RunSummary& r : rows) by_scale[r.problem_scale].push_back(&r);
  for (auto& [scale, runs] : by_scale)
    std::stable_sort(runs.begin(), runs.end(),
                     [](const RunSummary* a, const RunSummary* b) { return a->ranks < b->ranks; });
  const auto [lo, hi] = std::minmax_element(
      rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.ranks < b.ranks; });
  const bool any_energy = std::any_of(rows.begin(), rows.end(), [](const RunSummary& r) {
    return r.energy_to_target_wh.has_value();
  });

  std::string tmp_pattern = (fs::temp_directory_path() / "scaffold-report-XXXXXX").string();
  if (!::mkdtemp(tmp_pattern.data()))
    throw core::FileError(tmp_pattern,
                          std::string("cannot create temporary folder: ") + std::strerror(errno));
  const fs::path tmp = tmp_pattern;
  const fs::path partial = core::temporary_sibling(png);
  Cleanup cleanup{{tmp, partial}};

  std::string data;
  std::string plots;
  std::set<int> tics;
  int index = 0;
  for (const auto& [scale, runs] : by_scale) {
    for (const RunSummary* r : runs) {
      data += fmt::format("{} {:.17g} {} {}\n", r->ranks, r->time_to_target_s,
                          r->reached_target ? 1 : 0, plot_value(r->energy_to_target_wh));
      tics.insert(r->ranks);
    }
    data += "\n\n";
    const int color = index + 1;
    const std::string source = fmt::format("$runs index {}", index);
    plots +=
        fmt::format("{} using 1:2 with lines lc {} lw 2 title 'time to target, scale {}', \\\n",
                    source, color, scale);
    plots += fmt::format("{} using 1:($3 > 0 ? $2 : 1/0) with points lc {} pt 7 ps 3 notitle, \\\n",
                         source, color);
    if (std::any_of(runs.begin(), runs.end(),
                    [](const RunSummary* r) { return !r->reached_target; }))
      plots +=
          fmt::format("{} using 1:($3 > 0 ? 1/0 : $2) with points lc {} pt 6 ps 3 notitle, \\\n",
                      source, color);
    if (std::any_of(runs.begin(), runs.end(),
                    [](const RunSummary* r) { return r->energy_to_target_wh.has_value(); }))
      plots += fmt::format(
          "{} using 1:4 axes x1y2 with linespoints lc {} dt 2 lw 2 pt 5 ps 2 title "
          "'energy to target, scale {}', \\\n",
          source, color, scale);
    ++index;
  }
  if (any_not_reached(rows))
    plots +=
        "keyentry with points lc 'black' pt 6 ps 3 title 'target not reached (whole run)', \\\n";
  plots.resize(plots.size() - 4);  // the last ", \\\n"

  std::string tic_list;
  for (int t : tics) tic_list += (tic_list.empty() ? "" : ", ") + std::to_string(t);
  std::string script =
      "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
      "  set terminal pngcairo size 1800,1200 font 'sans,24' linewidth 2 noenhanced\n"
      "} else {\n"
      "  set terminal png size 1800,1200 font 'sans,24' linewidth 2 noenhanced\n"
      "}\n"
      "set datafile missing '?'\n"
      "$runs << EOD\n" +
      data +
      "EOD\n"
      "set grid\n"
      "set key below\n"
      "set title 'time and energy to target against ranks'\n"
      "set xlabel 'ranks'\n"
      "set logscale x 2\n" +
      fmt::format("set xrange [{:.17g}:{:.17g}]\n", lo->ranks / 1.5, hi->ranks * 1.5) +
      "set xtics (" + tic_list +
      ")\n"
      "set ylabel 'time to target [s]'\n"
      "set yrange [0:*]\n"
      "set offsets 0, 0, graph 0.1, 0\n";
  if (any_energy)
    script +=
        "set ytics nomirror\nset y2tics\nset y2label 'energy to target [Wh]'\nset y2range [0:*]\n";
  script += "set output " + gnuplot_quote(partial.string()) + "\n";
  script += "plot " + plots + "\nunset output\n";

  const fs::path script_file = tmp / "scaling.gp";
  const fs::path log_file = tmp / "gnuplot.log";
  core::write_file_atomic(script_file, script);
  const int status = run_gnuplot(*gnuplot, script_file, log_file);
  if (status != 0) {
    std::string log;
    try {
      log = core::read_file(log_file);
    } catch (const core::Error&) {
    }
    if (log.size() > 600) log = "..." + log.substr(log.size() - 600);
    throw core::Error(fmt::format("--plot {}: {} exited with status {}: {}", png.string(),
                                  gnuplot->string(), status, rstrip(log)));
  }
  std::error_code ec;
  if (fs::file_size(partial, ec) == 0 || ec)
    throw core::FileError(png.string(), "gnuplot wrote no image");
  fs::rename(partial, png, ec);
  if (ec)
    throw core::FileError(png.string(),
                          "cannot rename the finished image into place: " + ec.message());
}

}  // namespace scaffold::report
