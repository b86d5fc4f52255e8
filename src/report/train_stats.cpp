#include "report/train_stats.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

using Field = std::variant<int64_t EpochRecord::*, double EpochRecord::*>;
struct Column {
  const char* name;
  Field field;
};

// The one declaration of the columns: order and names are ScaFFold's (docs/benchmark.md).
const std::array<Column, 10> kColumns{{
    {"epoch", &EpochRecord::epoch},
    {"epoch_loss", &EpochRecord::epoch_loss},
    {"overall_loss", &EpochRecord::overall_loss},
    {"val_loss_epoch", &EpochRecord::val_loss_epoch},
    {"val_loss_avg", &EpochRecord::val_loss_avg},
    {"train_dice", &EpochRecord::train_dice},
    {"val_dice", &EpochRecord::val_dice},
    {"epoch_duration", &EpochRecord::epoch_duration_s},
    {"optimizer_steps", &EpochRecord::optimizer_steps},
    {"total_optimizer_steps", &EpochRecord::total_optimizer_steps},
}};

std::string errno_text() {
  return std::strerror(errno);
}

// Splits text into lines; `torn` is set when the last line has no newline. A trailing '\r' is
// dropped so files written with Python's csv module (CRLF) read the same.
std::vector<std::string_view> split_lines(std::string_view text, bool* torn) {
  std::vector<std::string_view> lines;
  *torn = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      *torn = true;
      end = text.size();
    }
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

bool parse_int(std::string_view s, int64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// Python str() may also write nan/inf/-inf, which from_chars accepts; from_chars does not accept
// a leading '+', which str() never writes.
bool parse_double(std::string_view s, double* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// Parses one data row; on failure returns false and says why in `why`.
bool parse_row(std::string_view line, EpochRecord* record, std::string* why) {
  const std::vector<std::string_view> fields = split_fields(line);
  if (fields.size() != kColumns.size()) {
    *why = "expected " + std::to_string(kColumns.size()) + " fields, found " +
           std::to_string(fields.size());
    return false;
  }
  for (std::size_t i = 0; i < kColumns.size(); ++i) {
    const bool ok = std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<std::decay_t<decltype(record->*member)>, int64_t>) {
            return parse_int(fields[i], &(record->*member));
          } else {
            return parse_double(fields[i], &(record->*member));
          }
        },
        kColumns[i].field);
    if (!ok) {
      *why =
          std::string("bad value '") + std::string(fields[i]) + "' in column " + kColumns[i].name;
      return false;
    }
  }
  return true;
}

std::string line_error(std::size_t index, const std::string& what) {
  return "line " + std::to_string(index + 1) + ": " + what;
}

// What a row must hold beyond parsing, given the row before it (nullptr for the first): epochs
// 1, 2, 3, ... in order; finite, non-negative durations (time to target adds them up); Dice in
// [0, 1] (NaN allowed: a diverged epoch is recorded as it was); step counts that add up. Losses
// may be NaN or Inf for the same reason. Returns why not, or "".
std::string row_problem(const EpochRecord& r, const EpochRecord* previous) {
  const int64_t want_epoch = previous != nullptr ? previous->epoch + 1 : 1;
  if (r.epoch != want_epoch)
    return "epoch " + std::to_string(r.epoch) + " where epoch " + std::to_string(want_epoch) +
           " was expected (epochs must run 1, 2, 3, ... without gaps or repeats)";
  if (!std::isfinite(r.epoch_duration_s) || r.epoch_duration_s < 0)
    return "epoch_duration " + core::python_float_str(r.epoch_duration_s) +
           ": expected a finite number of seconds >= 0";
  for (const auto& [name, value] :
       {std::pair{"train_dice", r.train_dice}, {"val_dice", r.val_dice}})
    if (!std::isnan(value) && (value < 0 || value > 1))
      return std::string(name) + " " + core::python_float_str(value) +
             ": a Dice score is in [0, 1]";
  if (r.optimizer_steps < 0)
    return "optimizer_steps " + std::to_string(r.optimizer_steps) + ": expected >= 0";
  if (previous != nullptr &&
      r.total_optimizer_steps != previous->total_optimizer_steps + r.optimizer_steps)
    return "total_optimizer_steps " + std::to_string(r.total_optimizer_steps) +
           " is not the previous row's " + std::to_string(previous->total_optimizer_steps) +
           " + optimizer_steps " + std::to_string(r.optimizer_steps);
  if (previous == nullptr && r.total_optimizer_steps < r.optimizer_steps)
    return "total_optimizer_steps " + std::to_string(r.total_optimizer_steps) +
           " is below optimizer_steps " + std::to_string(r.optimizer_steps);
  return "";
}

// The text split into lines, after checking the first one is our header.
std::vector<std::string_view> checked_lines(const fs::path& path, std::string_view text,
                                            bool* torn) {
  std::vector<std::string_view> lines = split_lines(text, torn);
  const std::string header = train_stats_header();
  if (lines.empty() || lines[0] != header)
    throw core::FileError(path.string(),
                          line_error(0, "header is '" + std::string(lines.empty() ? "" : lines[0]) +
                                            "', expected '" + header + "'"));
  return lines;
}

}  // namespace

std::string train_stats_header() {
  std::string header;
  for (const Column& column : kColumns) {
    if (!header.empty()) header += ',';
    header += column.name;
  }
  return header;
}

std::string train_stats_row(const EpochRecord& record) {
  std::string row;
  for (std::size_t i = 0; i < kColumns.size(); ++i) {
    if (i > 0) row += ',';
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<std::decay_t<decltype(record.*member)>, int64_t>) {
            row += std::to_string(record.*member);
          } else {
            row += core::python_float_str(record.*member);
          }
        },
        kColumns[i].field);
  }
  return row;
}

TrainStatsCsv::TrainStatsCsv(fs::path path) : path_(std::move(path)) {
  // Append mode after an atomic rewrite: the rows kept so far are never opened for writing.
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw core::FileError(path_.string(), "cannot open for appending: " + errno_text());
}

TrainStatsCsv TrainStatsCsv::open_fresh(const fs::path& run_dir) {
  const fs::path path = run_dir / kTrainStatsFileName;
  core::write_file_atomic(path, train_stats_header() + "\n");
  return TrainStatsCsv(path);
}

TrainStatsCsv TrainStatsCsv::open_resume(const fs::path& run_dir, int64_t resume_epoch,
                                         int64_t checkpoint_total_steps) {
  SCAFFOLD_CHECK(resume_epoch >= 1, "resume epoch must be 1-based");
  const fs::path path = run_dir / kTrainStatsFileName;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    // The rows of the epochs before the checkpoint are the run's time to solution: without
    // them a resumed run would report only the time since the restart.
    if (resume_epoch > 1)
      throw core::FileError(
          path.string(), "missing, but the checkpoint is at epoch " +
                             std::to_string(resume_epoch - 1) +
                             ": the run's history (its time to solution) is lost; restore the file "
                             "or start a new run");
    return open_fresh(run_dir);
  }
  const std::string text = core::read_file(path);
  bool torn = false;
  const std::vector<std::string_view> lines = checked_lines(path, text, &torn);
  std::string kept = std::string(lines[0]) + "\n";
  std::vector<EpochRecord> kept_records;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    if (torn && i + 1 == lines.size()) {
      LOG_WARN("{}: dropping the incomplete last line {} ('{}'), left by an interrupted write",
               path.string(), i + 1, lines[i]);
      continue;
    }
    // Rows being dropped only need a readable epoch: damage there must not block a resume.
    int64_t epoch = 0;
    if (!parse_int(split_fields(lines[i])[0], &epoch))
      throw core::FileError(path.string(),
                            line_error(i, "bad epoch in '" + std::string(lines[i]) + "'"));
    if (epoch >= resume_epoch) continue;
    EpochRecord record;
    std::string why;
    if (!parse_row(lines[i], &record, &why))
      throw core::FileError(path.string(), line_error(i, why));
    if (why = row_problem(record, kept_records.empty() ? nullptr : &kept_records.back());
        !why.empty())
      throw core::FileError(path.string(), line_error(i, why));
    kept_records.push_back(record);
    kept.append(lines[i]);
    kept += '\n';
  }
  // The kept rows must be the whole history up to the checkpoint, and agree with it.
  const int64_t last_kept = kept_records.empty() ? 0 : kept_records.back().epoch;
  if (last_kept != resume_epoch - 1)
    throw core::FileError(
        path.string(),
        "holds epochs up to " + std::to_string(last_kept) + " but the checkpoint is at epoch " +
            std::to_string(resume_epoch - 1) +
            ": the run's history was cut or belongs to another run; restore the file "
            "or start a new run");
  const int64_t kept_steps = kept_records.empty() ? 0 : kept_records.back().total_optimizer_steps;
  if (checkpoint_total_steps >= 0 && kept_steps != checkpoint_total_steps)
    throw core::FileError(
        path.string(),
        "epoch " + std::to_string(last_kept) + " has total_optimizer_steps " +
            std::to_string(kept_steps) + " but the checkpoint has " +
            std::to_string(checkpoint_total_steps) +
            ": the history belongs to another run; restore the file or start a new run");
  core::write_file_atomic(path, kept);
  return TrainStatsCsv(path);
}

TrainStatsCsv::TrainStatsCsv(TrainStatsCsv&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}

TrainStatsCsv& TrainStatsCsv::operator=(TrainStatsCsv&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
  }
  return *this;
}

TrainStatsCsv::~TrainStatsCsv() {
  if (file_) std::fclose(file_);
}

void TrainStatsCsv::append(const EpochRecord& record) {
  SCAFFOLD_CHECK(file_ != nullptr, "append on a moved-from TrainStatsCsv");
  const std::string line = train_stats_row(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw core::FileError(path_.string(), "write failed: " + errno_text());
  // fsync: the row must survive a node crash as well as a killed process, because a resume
  // trusts the CSV to match the checkpoint written right after it.
  if (::fsync(::fileno(file_)) != 0)
    throw core::FileError(path_.string(), "fsync failed: " + errno_text());
}

std::vector<EpochRecord> read_train_stats(const fs::path& path) {
  const std::string text = core::read_file(path);
  bool torn = false;
  const std::vector<std::string_view> lines = checked_lines(path, text, &torn);
  std::vector<EpochRecord> records;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    EpochRecord record;
    std::string why;
    if (!parse_row(lines[i], &record, &why))
      throw core::FileError(path.string(), line_error(i, why));
    if (why = row_problem(record, records.empty() ? nullptr : &records.back()); !why.empty())
      throw core::FileError(path.string(), line_error(i, why));
    records.push_back(record);
  }
  return records;
}

}  // namespace scaffold::report
