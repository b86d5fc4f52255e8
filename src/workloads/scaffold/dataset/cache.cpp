#include "workloads/scaffold/dataset/cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sha256.hpp"

namespace scaffold::dataset {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string utc_format(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &utc);
  return buf;
}

constexpr const char* kTempPrefix = ".tmp_";
constexpr const char* kHeartbeat = ".heartbeat";
constexpr const char* kOwner = ".owner";
constexpr const char* kDigestKey = "meta_sha256";
constexpr std::chrono::minutes kForeignIdle{10};

}  // namespace

std::string utc_iso8601_now() {
  return utc_format("%Y-%m-%dT%H:%M:%SZ");
}
std::string utc_stamp_now() {
  return utc_format("%Y%m%d-%H%M%S");
}

std::string key_json(const DatasetKey& key) {
  std::vector<std::pair<int, int>> pairs;  // (dim, shards)
  for (std::size_t k = 0; k < key.dc_num_shards.size() && k < key.dc_shard_dims.size(); ++k)
    pairs.push_back({key.dc_shard_dims[k], key.dc_num_shards[k]});
  std::sort(pairs.begin(), pairs.end());
  json dims = json::array(), shards = json::array();
  for (const auto& [dim, n] : pairs) {
    dims.push_back(dim);
    shards.push_back(n);
  }
  json j;  // nlohmann's object keeps keys sorted; dump() is compact
  j["dataset_format_version"] = kDatasetFormatVersion;
  j["generator"] = kGenerator;
  j["n_categories"] = key.n_categories;
  j["n_instances_used_per_fractal"] = key.n_instances_used_per_fractal;
  j["problem_scale"] = key.problem_scale;
  j["seed"] = key.seed;
  j["variance_threshold"] = key.variance_threshold;
  j["n_fracts_per_vol"] = key.n_fracts_per_vol;
  j["val_split"] = key.val_split;
  j["dc_num_shards"] = shards;
  j["dc_shard_dims"] = dims;
  return j.dump();
}

std::string config_id(const DatasetKey& key) {
  return core::sha256_hex(key_json(key)).substr(0, 12);
}

std::string meta_yaml(const DatasetMeta& m) {
  std::string text =
      "# scaffold dataset metadata: each value is JSON (so this file is also YAML)\n";
  auto line = [&](const char* key, const json& value) {
    text += fmt::format("{}: {}\n", key, value.dump());
  };
  line("config_id", m.config_id);
  line("dataset_format_version", m.format_version);
  line("generator", m.generator);
  line("config_subset", json::parse(m.key_json));
  line("code_commit", m.code_commit);
  line("created_at", m.created_at);
  line("dc_num_shards", m.dc_num_shards);
  line("dc_shard_dims", m.dc_shard_dims);
  line("n_volumes", m.n_volumes);
  line("n_train", m.n_train);
  line("n_val", m.n_val);
  line(kDigestKey, core::sha256_hex(text));
  return text;
}

DatasetMeta parse_meta(const std::string& text, const std::string& source) {
  json fields = json::object();
  std::istringstream in(text);
  std::string raw;
  std::string covered;  // every line but the digest's, as the digest was taken
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    if (raw.rfind(std::string(kDigestKey) + ": ", 0) != 0) covered += raw + (in.eof() ? "" : "\n");
    if (raw.empty() || raw[0] == '#') continue;
    const auto colon = raw.find(": ");
    if (colon == std::string::npos)
      throw core::FileError(source, fmt::format("line {}: expected 'key: value'", number));
    try {
      fields[raw.substr(0, colon)] = json::parse(raw.substr(colon + 2));
    } catch (const json::exception& e) {
      throw core::FileError(source, fmt::format("line {}: bad value: {}", number, e.what()));
    }
  }
  DatasetMeta m;
  try {
    m.config_id = fields.at("config_id").get<std::string>();
    m.format_version = fields.at("dataset_format_version").get<int>();
    m.generator = fields.at("generator").get<std::string>();
    m.key_json = fields.at("config_subset").dump();
    m.code_commit = fields.at("code_commit").get<std::string>();
    m.created_at = fields.at("created_at").get<std::string>();
    m.dc_num_shards = fields.at("dc_num_shards").get<std::vector<int>>();
    m.dc_shard_dims = fields.at("dc_shard_dims").get<std::vector<int>>();
    m.n_volumes = fields.at("n_volumes").get<int>();
    m.n_train = fields.at("n_train").get<int>();
    m.n_val = fields.at("n_val").get<int>();
    if (fields.contains(kDigestKey))
      m.meta_sha256_recorded = fields.at(kDigestKey).get<std::string>();
  } catch (const json::exception& e) {
    throw core::FileError(source, std::string("missing or mistyped field: ") + e.what());
  }
  m.meta_sha256_actual = core::sha256_hex(covered);
  return m;
}

bool is_temporary_dataset_dir(const fs::path& dir) {
  return dir.filename().string().rfind(kTempPrefix, 0) == 0;
}

std::optional<fs::path> find_reusable(const fs::path& id_dir, const std::string& id,
                                      const std::optional<std::string>& required_commit) {
  std::error_code ec;
  if (!fs::is_directory(id_dir, ec)) return std::nullopt;
  std::vector<fs::path> candidates;
  for (const auto& entry : fs::directory_iterator(id_dir, ec))
    if (entry.is_directory(ec) && !is_temporary_dataset_dir(entry.path()))
      candidates.push_back(entry.path());
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto& dir : candidates) {
    const fs::path meta_file = dir / "meta.yaml";
    if (!fs::is_regular_file(meta_file, ec)) continue;
    try {
      const DatasetMeta m = parse_meta(core::read_file(meta_file), meta_file.string());
      if (m.config_id != id || m.format_version != kDatasetFormatVersion ||
          m.generator != kGenerator)
        continue;
      if (required_commit && m.code_commit != *required_commit) continue;
      return dir;
    } catch (const core::Error&) {
      continue;  // an unreadable meta.yaml: not a dataset we can trust
    }
  }
  return std::nullopt;
}

fs::path dataset_lock_file(const fs::path& id_dir) {
  return id_dir / ".lock";
}

TemporaryDatasetDir make_temporary_dataset_dir(const fs::path& id_dir) {
  std::random_device rd;
  fs::path dir =
      id_dir / fmt::format("{}{}_{}_{:08x}", kTempPrefix, utc_stamp_now(), ::getpid(), rd());
  core::create_directories(dir);
  std::optional<core::FileLock> owner =
      core::FileLock::try_take(dir / kOwner);  // writes owner_tag()
  if (!owner)
    throw core::FileError((dir / kOwner).string(), "a new owner file is locked by another process");
  touch_heartbeat(dir);
  return {dir, std::move(*owner)};
}

void touch_heartbeat(const fs::path& tmp_dir) {
  core::write_file_atomic(tmp_dir / kHeartbeat, utc_iso8601_now());
}

DatasetDirScan remove_abandoned_dataset_dirs(const fs::path& id_dir,
                                             std::chrono::seconds fallback_idle) {
  DatasetDirScan scan;
  std::error_code ec;
  if (!fs::is_directory(id_dir, ec)) return scan;
  for (const auto& entry : fs::directory_iterator(id_dir, ec)) {
    if (!entry.is_directory(ec) || !is_temporary_dataset_dir(entry.path())) continue;
    auto newest = fs::last_write_time(entry.path(), ec);
    for (const char* name : {kHeartbeat, kOwner}) {
      const fs::path file = entry.path() / name;
      std::error_code file_ec;
      const auto changed = fs::last_write_time(file, file_ec);
      if (!file_ec) newest = std::max(newest, changed);
    }
    std::string note;
    try {
      note = core::read_file(entry.path() / kOwner);
    } catch (const core::Error&) {
    }
    // Another host's folder: its owner refreshes the heartbeat only between volumes, and where the
    // file system's flock does not reach across hosts its lock looks free; so ten minutes without
    // change, not one, before a free lock counts as a dead owner's.
    const std::optional<core::TemporaryOwner> owner = core::parse_owner_tag(note);
    const bool here = owner && owner->host == core::owner_host();
    if ((!here && fs::file_time_type::clock::now() - newest < kForeignIdle) ||
        !core::temporary_abandoned(entry.path() / kOwner, owner, newest, fallback_idle)) {
      ++scan.kept;
      continue;
    }
    fs::remove_all(entry.path(), ec);
    if (!ec) ++scan.removed;
  }
  return scan;
}

fs::path finalize_dataset_dir(const fs::path& tmp_dir, const std::string& commit) {
  const std::string base =
      utc_stamp_now() + "__" + (commit.empty() || commit == "unknown" ? "no-commit-id" : commit);
  std::error_code ec;
  fs::remove(tmp_dir / kHeartbeat, ec);
  fs::remove(tmp_dir / kOwner, ec);
  for (int suffix = 0;; ++suffix) {
    fs::path target =
        tmp_dir.parent_path() / (suffix == 0 ? base : fmt::format("{}-{}", base, suffix));
    if (fs::exists(target, ec)) continue;
    fs::rename(tmp_dir, target, ec);
    if (!ec) {
      core::sync_file_system(target.parent_path());  // the rename itself, on the disk
      return target;
    }
    if (!fs::exists(target))
      throw core::FileError(tmp_dir.string(),
                            "cannot rename to " + target.string() + ": " + ec.message());
  }
}

}  // namespace scaffold::dataset
