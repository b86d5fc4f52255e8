// The two energy files' columns, declared once each; writers and readers follow from them.
#include "report/energy_stats.hpp"

#include "core/fs.hpp"
#include "report/step_csv.hpp"

namespace scaffold::report {
namespace {

using Row = EnergyWindowRecord;

// The window's (or phase's) name: any text without a comma; `known` (when not empty) lists the
// names allowed.
StepCsvColumn<Row> name_column(std::string name, std::vector<std::string> known) {
  return {std::move(name), [](const Row& r) { return r.window; },
          [known = std::move(known)](const StepCsvRow& c, std::size_t i, Row& r) {
            r.window = std::string(c.text(i));
            if (r.window.empty()) c.fail("the window has no name");
            if (known.empty()) return;
            for (const std::string& k : known)
              if (r.window == k) return;
            c.fail("window '" + r.window + "' is not warmup, train or validation");
          }};
}

// The measured columns after the name (and the epoch): the same in both files.
std::vector<StepCsvColumn<Row>> measured_columns() {
  return {number_column<Row>("start_s", &Row::start_s, NumberRange::kAny),
          number_column<Row>("duration_s", &Row::duration_s, NumberRange::kFinite),
          number_column<Row>("energy_j", &Row::energy_j, NumberRange::kFinite),
          number_column<Row>("energy_wh", &Row::energy_wh, NumberRange::kFinite),
          number_column<Row>("avg_power_w", &Row::avg_power_w, NumberRange::kFinite),
          number_column<Row>("peak_power_w", &Row::peak_power_w, NumberRange::kFinite),
          integer_column<Row>("samples", &Row::samples)};
}

const StepCsvColumns<Row>& stats_columns() {
  static const StepCsvColumns<Row> columns([] {
    std::vector<StepCsvColumn<Row>> c{name_column("window", {"warmup", "train", "validation"}),
                                      integer_column<Row>("epoch", &Row::epoch)};
    for (auto& m : measured_columns()) c.push_back(std::move(m));
    return c;
  }());
  return columns;
}

const StepCsvColumns<Row>& phases_columns() {
  static const StepCsvColumns<Row> columns([] {
    std::vector<StepCsvColumn<Row>> c{name_column("phase", {})};
    for (auto& m : measured_columns()) c.push_back(std::move(m));
    return c;
  }());
  return columns;
}

void write(const StepCsvColumns<Row>& columns, const std::filesystem::path& file,
           const std::vector<Row>& rows) {
  std::string text = columns.header() + "\n";
  for (const Row& r : rows) text += columns.line(r) + "\n";
  core::write_file_atomic(file, text);
}

}  // namespace

std::string energy_stats_header() {
  return stats_columns().header();
}
std::string energy_phases_header() {
  return phases_columns().header();
}

void write_energy_stats(const std::filesystem::path& run_dir, const std::vector<Row>& rows) {
  write(stats_columns(), run_dir / kEnergyStatsFileName, rows);
}

void write_energy_phases(const std::filesystem::path& run_dir, const std::vector<Row>& phases) {
  write(phases_columns(), run_dir / kEnergyPhasesFileName, phases);
}

std::vector<Row> read_energy_stats(const std::filesystem::path& path) {
  return stats_columns().read(path);
}

std::vector<Row> read_energy_phases(const std::filesystem::path& path) {
  return phases_columns().read(path);
}

}  // namespace scaffold::report
