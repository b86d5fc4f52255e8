// train_stats.csv (docs/benchmark.md): one row per epoch in ScaFFold's exact column order, values
// spelled like Python str(), flushed and fsync'ed after every epoch so a killed run keeps its
// rows. The columns are declared once (train_stats.cpp) and drive the header, the writer and the
// reader. The trainer fills EpochRecord; it never writes the file itself.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::report {

inline constexpr const char* kTrainStatsFileName = "train_stats.csv";

// One epoch's results, in CSV column order; losses are sums or per-sample means (benchmark.md).
struct EpochRecord {
  int64_t epoch = 0;                  // 1-based
  double epoch_loss = 0.0;            // Σ batch-mean loss × batch size, over replicas
  double overall_loss = 0.0;          // epoch_loss / training samples
  double val_loss_epoch = 0.0;        // the same sum for validation
  double val_loss_avg = 0.0;          // val_loss_epoch / validation samples
  double train_dice = 0.0;            // mean soft foreground Dice per training sample
  double val_dice = 0.0;              // mean hard foreground Dice per validation sample
  double epoch_duration_s = 0.0;      // column `epoch_duration`
  int64_t optimizer_steps = 0;        // applied this epoch
  int64_t total_optimizer_steps = 0;  // cumulative across restarts
};

// The header line without its newline:
// epoch,epoch_loss,overall_loss,val_loss_epoch,val_loss_avg,train_dice,val_dice,epoch_duration,
// optimizer_steps,total_optimizer_steps
std::string train_stats_header();
// One row without its newline: ints plain, floats as Python str() (1.0, 0.1, 1e-05, nan).
std::string train_stats_row(const EpochRecord& record);

// Appends rows to <run_dir>/train_stats.csv. Only rank 0 holds one.
class TrainStatsCsv {
 public:
  // A fresh run: the file is replaced by one holding only the header.
  static TrainStatsCsv open_fresh(const std::filesystem::path& run_dir);
  // A run resuming at `resume_epoch` (checkpoint epoch + 1): keeps the header and the rows with
  // epoch < resume_epoch, drops the rest (rewritten atomically). A torn last line (no newline:
  // the run died mid-write) is dropped with a warning. A core::FileError naming the file (and
  // line), before anything is rewritten: a different header, a malformed or invalid kept row
  // (as read_train_stats checks), kept rows that are not exactly epochs 1 .. resume_epoch - 1, a
  // missing file when resume_epoch > 1, and (when `checkpoint_total_steps` >= 0) a last kept
  // row whose total_optimizer_steps differs from the checkpoint's.
  static TrainStatsCsv open_resume(const std::filesystem::path& run_dir, int64_t resume_epoch,
                                   int64_t checkpoint_total_steps = -1);

  TrainStatsCsv(TrainStatsCsv&& other) noexcept;
  TrainStatsCsv& operator=(TrainStatsCsv&& other) noexcept;
  TrainStatsCsv(const TrainStatsCsv&) = delete;
  TrainStatsCsv& operator=(const TrainStatsCsv&) = delete;
  ~TrainStatsCsv();

  // Writes one row, then fflush + fsync (once per epoch, so the cost is nothing next to an
  // epoch). Throws core::FileError naming the file on failure.
  void append(const EpochRecord& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TrainStatsCsv(std::filesystem::path path);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Parses a train_stats.csv back (e.g. for the final summary and the figures). Throws
// core::FileError naming the file, and the line for a bad header or row: a value that does not
// parse, epochs other than 1, 2, 3, ... in order, a duration that is negative or not finite, a
// Dice outside [0, 1], step counts that do not add up.
std::vector<EpochRecord> read_train_stats(const std::filesystem::path& path);

}  // namespace scaffold::report
