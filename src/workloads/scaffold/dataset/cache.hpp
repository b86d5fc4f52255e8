// The dataset cache (docs/dataset.md): dataset_dir/<config_id>/<YYYYmmdd-HHMMSS>__<commit>/, where
// config_id is the first 12 hex digits of SHA-256 over the compact, key-sorted JSON of the keys
// that decide the data. A dataset is built in a `.tmp_*` folder and renamed when complete, so a
// folder under a final name is always whole; `.tmp_*` folders are never reused and are removed
// once their owner is gone (core::temporary_abandoned). One process per key generates at a time:
// it holds <config_id>/.lock, and a second one waits there, then reuses what the first made.
// meta.yaml lines are `key: <JSON value>`, valid YAML read without yaml-cpp; its last line is the
// SHA-256 of the others, so an edit is noticed.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/fs.hpp"

namespace scaffold::dataset {

constexpr int kDatasetFormatVersion = 5;
constexpr const char* kGenerator = "scaffold";  // our data is not ScaFFold's: separate caches

// The keys that decide a dataset's content and layout.
struct DatasetKey {
  int n_categories = 5;
  int n_instances_used_per_fractal = 145;
  int problem_scale = 7;
  uint64_t seed = 42;
  double variance_threshold = 0.15;
  int n_fracts_per_vol = 3;
  double val_split = 30.0;
  std::vector<int> dc_num_shards{1, 1, 1};
  std::vector<int> dc_shard_dims{2, 3, 4};
};

// Compact JSON with sorted keys; the (dim, shards) pairs sorted by dim so equivalent orders agree.
std::string key_json(const DatasetKey& key);
std::string config_id(const DatasetKey& key);  // first 12 hex digits of SHA-256(key_json)

struct DatasetMeta {
  std::string config_id;
  int format_version = kDatasetFormatVersion;
  std::string generator = kGenerator;
  std::string key_json;  // config_subset, as hashed
  std::string code_commit;
  std::string created_at;          // UTC, ISO 8601
  std::vector<int> dc_num_shards;  // the physical layout, in the order given
  std::vector<int> dc_shard_dims;
  int n_volumes = 0;
  int n_train = 0;
  int n_val = 0;
  // The meta_sha256 line as read ("" when absent: written by an older scaffold) and the SHA-256
  // of the file's other lines; meta_yaml writes the latter.
  std::string meta_sha256_recorded;
  std::string meta_sha256_actual;
};

std::string meta_yaml(const DatasetMeta& meta);
// Throws core::FileError naming `source` when a line or a value is malformed.
DatasetMeta parse_meta(const std::string& text, const std::string& source);

// The newest complete dataset under `id_dir` whose meta matches (id, format, generator and, when
// `required_commit` is set, the commit), scanning folder names in reverse order, skipping .tmp_*.
std::optional<std::filesystem::path> find_reusable(
    const std::filesystem::path& id_dir, const std::string& id,
    const std::optional<std::string>& required_commit);

// The lock a generating process holds on a key's folder: <id_dir>/.lock.
std::filesystem::path dataset_lock_file(const std::filesystem::path& id_dir);

// A new, empty `.tmp_<ts>_<pid>_<hex8>` folder under id_dir, with its owner file `.owner`
// ("<pid>@<host>"), flock'ed by `owner` for as long as the generation runs.
struct TemporaryDatasetDir {
  std::filesystem::path path;
  core::FileLock owner;
};
TemporaryDatasetDir make_temporary_dataset_dir(const std::filesystem::path& id_dir);
bool is_temporary_dataset_dir(const std::filesystem::path& dir);
// Marks a temporary folder as alive (writers call it now and then).
void touch_heartbeat(const std::filesystem::path& tmp_dir);
// Removes the .tmp_* folders whose owner is provably gone: core::temporary_abandoned on their
// owner file, with the newest of the folder, heartbeat and owner file as the last change, and ten
// minutes without change for another host's folder (`fallback_idle` applies to a folder without
// an owner file, or without flock).
struct DatasetDirScan {
  std::size_t removed = 0;
  std::size_t kept = 0;  // of owners still alive (or not provably gone)
};
DatasetDirScan remove_abandoned_dataset_dirs(const std::filesystem::path& id_dir,
                                             std::chrono::seconds fallback_idle);
// Renames a finished temporary folder to <YYYYmmdd-HHMMSS>__<commit> (suffix -1, -2, ... if taken),
// without its heartbeat and owner file.
std::filesystem::path finalize_dataset_dir(const std::filesystem::path& tmp_dir,
                                           const std::string& commit);

// UTC time as ISO 8601 ("2026-11-30T10:20:00Z") and as a folder stamp ("20261130-102000").
std::string utc_iso8601_now();
std::string utc_stamp_now();

}  // namespace scaffold::dataset
