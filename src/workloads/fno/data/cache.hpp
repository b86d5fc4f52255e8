// The FNO dataset cache, torch-free: what a problem's samples look like on disk (ProblemLayout),
// the key that names a dataset (compact, key-sorted JSON of everything that decides its bytes,
// hashed with SHA-256), the folder layout and meta.json.
//   <dataset_dir>/fno_<problem>/<config_id>/            complete (meta.json written last)
//   <dataset_dir>/fno_<problem>/<config_id>.partial/    being generated: key.json + finished
//   samples <dataset_dir>/fno_<problem>/<config_id>.lock        held by the generating job's rank 0
//   .../{train,val}/<index:06d>_<name>.npy              float32, C order
// Every .npy is written atomically, so a file under its final name is whole; a sample is done
// when all its files are; a rerun resumes the .partial folder and makes only what is missing.
// The folder is renamed to its final name only after every file was read back (statistics,
// digests, finite values), so nothing under a final name is ever partial. meta.json is the seal:
// the SHA-256 of every file and a digest of itself (meta_sha256). Not the fractal dataset's cache:
// those folders carry a timestamp and commit; ours are deterministic, so the key alone names them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

constexpr int kFnoDataFormatVersion = 1;  // bump when the generators' output changes
constexpr const char* kFnoGenerator = "scaffold-fno-data";

// One array of a sample: <index>_<name>.npy of this shape.
struct SampleFile {
  std::string name;
  std::vector<int64_t> shape;
};

// What the examples of a problem are.
struct ProblemLayout {
  std::vector<int64_t> grid;  // spatial shape of every field: (N) or (H, W) or (nx, nz)
  std::vector<std::string> input_channels, target_channels;
  std::vector<SampleFile> files;      // per sample, in generation order
  int64_t examples_per_sample = 1;    // Rayleigh-Benard: states - 1 consecutive pairs
  int64_t timesteps_per_example = 1;  // timesteps the model predicts for one example
  double time_per_timestep = 0.0;     // simulated time between the timesteps of the data
  int64_t solver_steps_per_timestep = 1;
  int64_t solver_steps_per_sample = 0;
};
ProblemLayout problem_layout(const FnoDataOptions& options);

int64_t sample_count(const FnoDataOptions& options, FnoSplit split);

// The key: problem, seed, the chosen problem's options (all of them, sample counts included),
// the format version and the generator. Threads, paths and the commit are not part of it.
std::string key_json(const FnoDataOptions& options);
std::string config_id(const FnoDataOptions& options);  // first 12 hex digits of SHA-256(key_json)

struct FnoDataPaths {
  std::filesystem::path problem_dir;  // <dataset_dir>/fno_<problem>
  std::filesystem::path root;         // the complete dataset
  std::filesystem::path partial;      // the folder being generated
  std::filesystem::path lock;
};
FnoDataPaths data_paths(const FnoDataOptions& options);

// <root>/<split>/<index:06d>_<name>.npy
std::filesystem::path sample_path(const std::filesystem::path& root, FnoSplit split, int64_t index,
                                  const std::string& name);
// The same file's path below the dataset folder, "<split>/<index:06d>_<name>.npy" (the keys of
// meta.json's file_sha256).
std::string sample_name(FnoSplit split, int64_t index, const std::string& name);

// The layout as compact JSON (meta.json's "layout"), for comparing two layouts.
std::string layout_text(const ProblemLayout& layout);

struct FnoChannelStats {
  std::vector<double> mean, std;  // per channel, over every training example
};

// meta.json of a complete dataset.
struct FnoDataMeta {
  int format_version = kFnoDataFormatVersion;
  std::string generator = kFnoGenerator;
  std::string config_id;
  std::string key_json;  // as hashed
  std::string problem;
  std::string code_commit;
  std::string created_at;  // UTC, ISO 8601
  ProblemLayout layout;
  int64_t train_samples = 0, val_samples = 0;
  FnoChannelStats input_stats, target_stats;
  std::string dataset_sha256;  // SHA-256 over the files' SHA-256s in (split, index, file) order
  // Hex SHA-256 of every file by sample_name(); empty when meta.json was written by a scaffold
  // without per-file digests (its files are then checked against dataset_sha256 alone).
  std::map<std::string, std::string> file_sha256;
  // The meta_sha256 entry as read ("" when absent: an older meta.json) and the SHA-256 of the
  // file's other entries (compact, key-sorted JSON); meta_json writes the latter.
  std::string meta_sha256_recorded, meta_sha256_actual;
  int64_t solver_steps = 0;   // taken to make every sample
  double generation_s = 0.0;  // wall time of the generation that completed it
  int64_t examples(FnoSplit split) const {
    return (split == FnoSplit::Train ? train_samples : val_samples) * layout.examples_per_sample;
  }
};

// meta.json's text: every field above plus meta_sha256, the SHA-256 of the others.
std::string meta_json(const FnoDataMeta& meta);
// Throws core::FileError naming `source` when the text is not a meta.json of this format
// (meta_sha256 is read, not checked: compare meta_sha256_recorded with meta_sha256_actual).
FnoDataMeta parse_meta_json(const std::string& text, const std::string& source);

// UTC now as ISO 8601.
std::string utc_now_iso8601();

}  // namespace scaffold::fno
