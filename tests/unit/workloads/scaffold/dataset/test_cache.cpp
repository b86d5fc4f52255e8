// The dataset cache: a stable key, reuse of the newest complete dataset, interrupted generations
// never reused and removed only once their owner is gone, and meta.yaml's digest of itself.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sha256.hpp"
#include "fs_test_util.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/cache.hpp"

namespace scaffold::dataset {
namespace {
namespace fs = std::filesystem;

TEST(Cache, KeyJsonIsCompactSortedAndShardPairsSortedByDim) {
  DatasetKey k;
  EXPECT_EQ(key_json(k),
            "{\"dataset_format_version\":5,\"dc_num_shards\":[1,1,1],\"dc_shard_dims\":[2,3,4],"
            "\"generator\":\"scaffold\",\"n_categories\":5,\"n_fracts_per_vol\":3,"
            "\"n_instances_used_per_fractal\":145,\"problem_scale\":7,\"seed\":42,"
            "\"val_split\":30.0,\"variance_threshold\":0.15}");
  // Computed independently, once, from the JSON above:
  //   python3 -c 'import hashlib; print(hashlib.sha256(b"<the key_json above>").hexdigest()[:12])'
  // A change here renames every cached dataset folder: bump kDatasetFormatVersion deliberately.
  EXPECT_EQ(config_id(k), "293f4027b355");

  DatasetKey a = k, b = k;
  a.dc_num_shards = {2, 1, 4};
  a.dc_shard_dims = {2, 3, 4};
  b.dc_num_shards = {4, 2, 1};
  b.dc_shard_dims = {4, 2, 3};  // the same (dim, shards) pairs in another order
  EXPECT_EQ(config_id(a), config_id(b));
  EXPECT_NE(config_id(a), config_id(k));
}

// The id of several keys recomputed by Python from the recipe in docs/dataset.md (json.dumps with
// sorted keys and no spaces, the (dim, shards) pairs sorted by dim, hashlib's SHA-256, 12 hex
// digits), plus this project's "generator" field, from the key's values as the test sets them.
TEST(Cache, ConfigIdIsTheRecipesSha256AsPythonComputesIt) {
  struct Case {
    DatasetKey key;
    std::string python_dict;  // the same values as a Python dict, shards as (dim, n) pairs
  };
  std::vector<Case> cases(4);
  cases[0].python_dict =
      "dict(n_categories=5, n_instances_used_per_fractal=145, problem_scale=7, seed=42, "
      "variance_threshold=0.15, n_fracts_per_vol=3, val_split=30.0, pairs=[(2,1),(3,1),(4,1)])";
  cases[1].key.dc_num_shards = {4, 2};
  cases[1].key.dc_shard_dims = {4, 2};  // W before D: sorted to (2,2), (4,4)
  cases[1].key.seed = 7;
  cases[1].key.val_split = 12.5;
  cases[1].python_dict =
      "dict(n_categories=5, n_instances_used_per_fractal=145, problem_scale=7, seed=7, "
      "variance_threshold=0.15, n_fracts_per_vol=3, val_split=12.5, pairs=[(4,4),(2,2)])";
  cases[2].key.n_categories = 2;
  cases[2].key.n_instances_used_per_fractal = 24;
  cases[2].key.problem_scale = 5;
  cases[2].key.variance_threshold = 0.1 + 0.2;  // 0.30000000000000004: repr's shortest round trip
  cases[2].python_dict =
      "dict(n_categories=2, n_instances_used_per_fractal=24, problem_scale=5, seed=42, "
      "variance_threshold=0.1+0.2, n_fracts_per_vol=3, val_split=30.0, pairs=[(2,1),(3,1),(4,1)])";
  cases[3].key.dc_num_shards = {1, 2, 2};
  cases[3].key.dc_shard_dims = {2, 4, 3};
  cases[3].key.n_fracts_per_vol = 2;
  cases[3].python_dict =
      "dict(n_categories=5, n_instances_used_per_fractal=145, problem_scale=7, seed=42, "
      "variance_threshold=0.15, n_fracts_per_vol=2, val_split=30.0, pairs=[(2,1),(4,2),(3,2)])";
  std::string script =
      "import hashlib, json, sys\n"
      "for d in [";
  for (const Case& c : cases) script += c.python_dict + ", ";
  script +=
      "]:\n"
      "    pairs = sorted(d.pop('pairs'))\n"
      "    d.update(dataset_format_version=5, generator='scaffold', dc_shard_dims=[p[0] for p in "
      "pairs], "
      "dc_num_shards=[p[1] for p in pairs])\n"
      "    s = json.dumps(d, sort_keys=True, separators=(',', ':'))\n"
      "    print(hashlib.sha256(s.encode()).hexdigest()[:12])\n";
  test::TempDir dir;
  const std::string file = (dir.path() / "id.py").string();
  std::ofstream(file) << script;
  const auto r = test::run_command(std::string(SCAFFOLD_PYTHON) + " " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::set<std::string> distinct;
  for (const Case& c : cases) {
    std::string expected;
    ASSERT_TRUE(std::getline(lines, expected)) << r.output;
    EXPECT_EQ(config_id(c.key), expected) << key_json(c.key) << " vs " << c.python_dict;
    distinct.insert(expected);
  }
  EXPECT_EQ(distinct.size(), cases.size());
}

TEST(Cache, EveryListedKeyChangesTheId) {
  const DatasetKey base;
  std::vector<DatasetKey> variants(9, base);
  variants[0].n_categories = 6;
  variants[1].n_instances_used_per_fractal = 144;
  variants[2].problem_scale = 6;
  variants[3].seed = 43;
  variants[4].variance_threshold = 0.2;
  variants[5].n_fracts_per_vol = 2;
  variants[6].val_split = 25;
  variants[7].dc_num_shards = {1, 2, 1};
  variants[8].dc_shard_dims = {2, 4, 3};
  variants[8].dc_num_shards = {1, 2, 1};  // shards on W instead of H
  std::set<std::string> ids{config_id(base)};
  for (const auto& v : variants) EXPECT_TRUE(ids.insert(config_id(v)).second) << key_json(v);
}

DatasetMeta meta_for(const DatasetKey& key, const std::string& commit) {
  DatasetMeta m;
  m.config_id = config_id(key);
  m.key_json = key_json(key);
  m.code_commit = commit;
  m.created_at = "2026-11-30T10:00:00Z";
  m.dc_num_shards = key.dc_num_shards;
  m.dc_shard_dims = key.dc_shard_dims;
  m.n_volumes = 240;
  m.n_train = 168;
  m.n_val = 72;
  return m;
}

TEST(Cache, MetaRoundTripsAndBadMetaIsAnErrorNamingTheFile) {
  const DatasetMeta m = meta_for(DatasetKey{}, "abc123");
  const DatasetMeta back = parse_meta(meta_yaml(m), "meta.yaml");
  EXPECT_EQ(back.config_id, m.config_id);
  EXPECT_EQ(back.key_json, m.key_json);
  EXPECT_EQ(back.code_commit, "abc123");
  EXPECT_EQ(back.n_val, 72);
  EXPECT_EQ(back.dc_shard_dims, m.dc_shard_dims);
  try {
    parse_meta("config_id: \"x\"\n", "/some/meta.yaml");
    FAIL();
  } catch (const core::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("/some/meta.yaml"), std::string::npos);
  }
  EXPECT_THROW(parse_meta("just words\n", "m"), core::FileError);
}

TEST(Cache, ReusesTheNewestCompleteMatchingDataset) {
  test::TempDir dir;
  const DatasetKey key;
  const std::string id = config_id(key);
  const fs::path id_dir = dir.path() / id;
  EXPECT_FALSE(find_reusable(id_dir, id, std::nullopt));
  auto make = [&](const std::string& name, const DatasetMeta& m) {
    core::create_directories(id_dir / name);
    core::write_file_atomic(id_dir / name / "meta.yaml", meta_yaml(m));
  };
  make("20260101-000000__aaa", meta_for(key, "aaa"));
  make("20260301-000000__bbb", meta_for(key, "bbb"));
  core::create_directories(id_dir / "20260401-000000__nometa");   // no meta.yaml: incomplete
  make(".tmp_20260501-000000_1_deadbeef", meta_for(key, "ccc"));  // interrupted: never reused
  DatasetMeta other = meta_for(key, "ddd");
  other.config_id = "000000000000";
  make("20260601-000000__ddd", other);  // another key's meta: not ours

  EXPECT_EQ(find_reusable(id_dir, id, std::nullopt), id_dir / "20260301-000000__bbb");
  EXPECT_EQ(find_reusable(id_dir, id, std::string("aaa")), id_dir / "20260101-000000__aaa");
  EXPECT_FALSE(find_reusable(id_dir, id, std::string("zzz")));
}

// A generation folder is removed once its owner is provably gone (issue 16, item 9): at once
// when its pid on this host is dead, never while its owner holds the owner file's flock however
// old it is, another host's only after ten minutes without change, and after a day without change
// when it has no owner file (an older scaffold's).
TEST(Cache, TemporaryFoldersAreRemovedOnlyWhenTheirOwnerIsGone) {
  test::TempDir dir;
  const auto two_days_ago = fs::file_time_type::clock::now() - std::chrono::hours(48);
  const auto age = [&](const fs::path& folder) {
    for (const char* name : {"", ".heartbeat", ".owner"}) {
      std::error_code ec;
      fs::last_write_time(*name ? folder / name : folder, two_days_ago, ec);
    }
  };

  TemporaryDatasetDir live = make_temporary_dataset_dir(dir.path());  // this process: alive, locked
  EXPECT_TRUE(is_temporary_dataset_dir(live.path));
  EXPECT_EQ(core::read_file(live.path / ".owner"), core::owner_tag() + "\n");
  age(live.path);

  fs::path dead = make_temporary_dataset_dir(dir.path()).path;  // its lock released at once
  std::ofstream(dead / ".owner") << test::dead_pid() << "@" << core::owner_host() << "\n";

  // Another host's, its lock free, five minutes without change: it may still be between volumes.
  const fs::path foreign = make_temporary_dataset_dir(dir.path()).path;
  std::ofstream(foreign / ".owner") << "1@elsewhere\n";
  for (const char* name : {"", ".heartbeat", ".owner"})
    fs::last_write_time(*name ? foreign / name : foreign,
                        fs::file_time_type::clock::now() - std::chrono::minutes(5));

  const fs::path old_style = dir.path() / ".tmp_20260101-000000_1_deadbeef";
  core::create_directories(old_style);
  std::ofstream(old_style / ".heartbeat") << "2026-01-01T00:00:00Z";
  const fs::path fresh_old_style = dir.path() / ".tmp_20260101-000001_1_deadbeef";
  core::create_directories(fresh_old_style);
  age(old_style);

  const DatasetDirScan scan = remove_abandoned_dataset_dirs(dir.path(), std::chrono::hours(24));
  EXPECT_EQ(scan.removed, 2u);
  EXPECT_EQ(scan.kept, 3u);
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_TRUE(fs::exists(live.path)) << "a live generation's folder was removed";
  EXPECT_FALSE(fs::exists(dead)) << "a dead owner's folder was kept";
  EXPECT_FALSE(fs::exists(old_style));
  EXPECT_TRUE(fs::exists(fresh_old_style));

  // The owner ends: its lock is free, and once nothing changed for a minute (here: a day) the
  // folder goes with the next clean-up.
  live.owner.release();
  EXPECT_EQ(remove_abandoned_dataset_dirs(dir.path(), std::chrono::hours(24)).removed, 0u)
      << "removed at once";
  age(live.path);
  age(foreign);  // and the other host's, idle for a day now
  EXPECT_EQ(remove_abandoned_dataset_dirs(dir.path(), std::chrono::hours(24)).removed, 2u);
  EXPECT_FALSE(fs::exists(live.path));
  EXPECT_FALSE(fs::exists(foreign));
}

TEST(Cache, FinalisedByRenameWithoutHeartbeatOrOwner) {
  test::TempDir dir;
  const TemporaryDatasetDir tmp = make_temporary_dataset_dir(dir.path());
  std::ofstream(tmp.path / "payload") << "x";
  const fs::path final_dir = finalize_dataset_dir(tmp.path, "abc");
  EXPECT_FALSE(fs::exists(tmp.path));
  EXPECT_TRUE(fs::exists(final_dir / "payload"));
  EXPECT_FALSE(fs::exists(final_dir / ".owner"));
  EXPECT_FALSE(fs::exists(final_dir / ".heartbeat"));
  EXPECT_FALSE(is_temporary_dataset_dir(final_dir));
  EXPECT_NE(final_dir.filename().string().find("__abc"), std::string::npos);
  // A second dataset finished in the same second gets a suffix instead of clobbering the first.
  const fs::path again = finalize_dataset_dir(make_temporary_dataset_dir(dir.path()).path, "abc");
  EXPECT_NE(again, final_dir);
  EXPECT_TRUE(fs::exists(final_dir / "payload"));
}

// meta.yaml's last line is the SHA-256 of the others (computed here with core::sha256_hex over
// the text as written); an edit anywhere shows as a mismatch, a missing line as "none recorded".
TEST(Cache, MetaCarriesADigestOfItself) {
  const std::string text = meta_yaml(meta_for(DatasetKey{}, "abc123"));
  const auto last = text.rfind("meta_sha256: \"");
  ASSERT_NE(last, std::string::npos) << text;
  EXPECT_EQ(text.substr(last), "meta_sha256: \"" + core::sha256_hex(text.substr(0, last)) + "\"\n");
  const DatasetMeta read = parse_meta(text, "meta.yaml");
  EXPECT_EQ(read.meta_sha256_recorded, core::sha256_hex(text.substr(0, last)));
  EXPECT_EQ(read.meta_sha256_actual, read.meta_sha256_recorded);

  std::string edited = text;
  edited.replace(edited.find("\"abc123\""), 8, "\"abc124\"");
  const DatasetMeta changed = parse_meta(edited, "meta.yaml");
  EXPECT_EQ(changed.code_commit, "abc124");
  EXPECT_NE(changed.meta_sha256_actual, changed.meta_sha256_recorded);

  const DatasetMeta older = parse_meta(text.substr(0, last), "meta.yaml");
  EXPECT_EQ(older.meta_sha256_recorded, "");
}

}  // namespace
}  // namespace scaffold::dataset
