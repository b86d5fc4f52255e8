// The dataset cache (spec §4.6): dataset_dir/<config_id>/<YYYYmmdd-HHMMSS>__<commit>/, where
// config_id is the first 12 hex digits of SHA-256 over the compact, key-sorted JSON of the keys
// that decide the data. A dataset is built in a `.tmp_*` folder and renamed when complete, so a
// folder under a final name is always whole; `.tmp_*` folders are never reused and are removed
// once idle for a day. meta.yaml lines are `key: <JSON value>`, valid YAML read without yaml-cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
  std::string key_json;      // config_subset, as hashed
  std::string code_commit;
  std::string created_at;    // UTC, ISO 8601
  std::vector<int> dc_num_shards;  // the physical layout, in the order given
  std::vector<int> dc_shard_dims;
  int n_volumes = 0;
  int n_train = 0;
  int n_val = 0;
};

std::string meta_yaml(const DatasetMeta& meta);
// Throws core::FileError naming `source` when a line or a value is malformed.
DatasetMeta parse_meta(const std::string& text, const std::string& source);

// The newest complete dataset under `id_dir` whose meta matches (id, format, generator and, when
// `required_commit` is set, the commit), scanning folder names in reverse order, skipping .tmp_*.
std::optional<std::filesystem::path> find_reusable(const std::filesystem::path& id_dir,
                                                   const std::string& id,
                                                   const std::optional<std::string>& required_commit);

// A new, empty `.tmp_<ts>_<pid>_<hex8>` folder under id_dir.
std::filesystem::path make_temporary_dataset_dir(const std::filesystem::path& id_dir);
bool is_temporary_dataset_dir(const std::filesystem::path& dir);
// Marks a temporary folder as alive (writers call it now and then).
void touch_heartbeat(const std::filesystem::path& tmp_dir);
// Removes .tmp_* folders whose folder and heartbeat are older than max_idle; returns how many.
std::size_t remove_stale_dataset_dirs(const std::filesystem::path& id_dir,
                                      std::chrono::seconds max_idle);
// Renames a finished temporary folder to <YYYYmmdd-HHMMSS>__<commit> (suffix -1, -2, ... if taken).
std::filesystem::path finalize_dataset_dir(const std::filesystem::path& tmp_dir,
                                           const std::string& commit);

// UTC time as ISO 8601 ("2026-11-30T10:20:00Z") and as a folder stamp ("20261130-102000").
std::string utc_iso8601_now();
std::string utc_stamp_now();

}  // namespace scaffold::dataset
