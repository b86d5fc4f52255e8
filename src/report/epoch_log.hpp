// A workload's per-epoch (or per-interval) CSV as it grows: rank 0 appends a row after each epoch
// and rewrites the file atomically, so a run stopped or killed between epochs leaves whole rows
// only; a resumed run keeps the rows up to its checkpoint first. The columns are the workload's
// (its header and line functions); this class only keeps the rows and the file in step.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.hpp"

namespace scaffold::report {

template <class Row>
class EpochLog {
 public:
  using LineFn = std::string (*)(const Row&);

  EpochLog(std::filesystem::path file, std::string header, LineFn line)
      : file_(std::move(file)), header_(std::move(header)), line_(line) {}

  // A resumed run: the rows of the existing file (read by `read`, a path -> rows function) for
  // which `keep(row)` holds, e.g. those up to the checkpoint's epoch. No file: no rows.
  template <class Read, class Keep>
  void resume(Read read, Keep keep) {
    rows_.clear();
    if (!std::filesystem::exists(file_)) return;
    for (const Row& r : read(file_))
      if (keep(r)) rows_.push_back(r);
  }

  // Appends `row` and rewrites the file.
  void append(Row row) {
    rows_.push_back(std::move(row));
    write();
  }

  // Rewrites the file from the rows (after a change to the last one).
  void write() const {
    std::string text = header_ + "\n";
    for (const Row& r : rows_) text += line_(r) + "\n";
    core::write_file_atomic(file_, text);
  }

  const std::vector<Row>& rows() const { return rows_; }
  std::vector<Row>& rows() { return rows_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::string header_;
  LineFn line_;
  std::vector<Row> rows_;
};

}  // namespace scaffold::report
