// A workload's per-epoch (or per-interval) CSV as it grows: rank 0 appends a row after each epoch
// and rewrites the file atomically, so a run stopped or killed between epochs leaves whole rows
// only; a resumed run keeps the rows up to its checkpoint first. The columns are the workload's,
// declared once (report::StepCsvColumns: header, line and reader); this class only keeps the
// rows and the file in step.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.hpp"
#include "report/step_csv.hpp"

namespace scaffold::report {

template <class Row>
class EpochLog {
 public:
  // `columns` must outlive the log (a workload's static declaration).
  EpochLog(std::filesystem::path file, const StepCsvColumns<Row>& columns)
      : file_(std::move(file)), columns_(&columns) {}

  // A resumed run: the rows of the existing file (read through the columns) for which
  // `keep(row)` holds, e.g. those up to the checkpoint's epoch. No file: no rows.
  template <class Keep>
  void resume(Keep keep) {
    rows_.clear();
    if (!std::filesystem::exists(file_)) return;
    for (const Row& r : columns_->read(file_))
      if (keep(r)) rows_.push_back(r);
  }

  // Appends `row` and rewrites the file.
  void append(Row row) {
    rows_.push_back(std::move(row));
    write();
  }

  // Rewrites the file from the rows (after a change to the last one).
  void write() const {
    std::string text = columns_->header() + "\n";
    for (const Row& r : rows_) text += columns_->line(r) + "\n";
    core::write_file_atomic(file_, text);
  }

  const std::vector<Row>& rows() const { return rows_; }
  std::vector<Row>& rows() { return rows_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  const StepCsvColumns<Row>* columns_;
  std::vector<Row> rows_;
};

}  // namespace scaffold::report
