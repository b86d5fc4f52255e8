// End-to-end tests of `scaffold generate_dataset`: byte-identical across threads and ranks,
// numpy reads every file with the right dtype and shape, sharded files concatenate to the
// unsharded volume, mask values match the contents table, and the cache is reused, keyed, never
// serves an interrupted generation or a folder that differs from its manifest, is shared by two
// concurrent generations, refuses a damaged instance cloud, and survives a failed write clean.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.hpp"
#include "core/npy.hpp"
#include "e2e/e2e_util.hpp"
#include "fs_test_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::CommandResult;
using test::kBinary;
using test::mpiexec;
using test::run_command;
using test::TempDir;

// Scale 4 (16^3 volumes), 2 categories x 12 instances: 8 volumes (6 training, 2 validation).
fs::path write_config(const fs::path& dir, const std::string& extra = "", int scale = 4) {
  const fs::path cfg = dir / "data.yml";
  std::ofstream(cfg) << "problem_scale: " << scale << "\nunet_bottleneck_dim: 2\nn_categories: 2\n"
                     << "n_instances_used_per_fractal: 12\nseed: 5\n"
                     << "fract_base_dir: " << (dir / "lib").string() << "\n"
                     << "dataset_dir: " << (dir / "data").string() << "\n"
                     << extra;
  return cfg;
}

// Everything but meta.yaml, which holds a timestamp.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  return test::snapshot(root, "meta.yaml");
}

// The one finished dataset folder under <dir>/data/<id>/ (next to it: the key's .lock file).
fs::path dataset_root(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& id : fs::directory_iterator(dir / "data"))
    for (const auto& d : fs::directory_iterator(id.path()))
      if (d.is_directory() && d.path().filename().string().rfind(".tmp_", 0) != 0)
        found.push_back(d.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}

std::string generate(const fs::path& cfg, const std::string& extra = "",
                     const std::string& launcher = "") {
  const auto r =
      run_command(launcher + kBinary + " generate_dataset -c " + cfg.string() + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(GenerateDataset, ByteIdenticalForThreadsAndRanks) {
  TempDir a, b, c;
  generate(write_config(a.path()), "--threads 1");
  generate(write_config(b.path()), "--threads 2");
  generate(write_config(c.path()), "--threads 1", mpiexec(2));
  const auto ref = snapshot(dataset_root(a.path()));
  EXPECT_EQ(ref.size(), 2u * 8u + 5u);  // 8 volumes + 8 masks, 3 CSV + 2 JSON tables
  EXPECT_EQ(snapshot(dataset_root(b.path())), ref);
  EXPECT_EQ(snapshot(dataset_root(c.path())), ref);
}

TEST(GenerateDataset, NumpyReadsFilesShardsConcatenateAndMasksMatchContents) {
  TempDir dir;
  generate(write_config(dir.path()));
  generate(write_config(dir.path()), "--dc-num-shards 2 1 1 --dc-shard-dims 2 3 4");
  generate(write_config(dir.path()), "--dc-num-shards 1 2 2 --dc-shard-dims 2 3 4");
  generate(write_config(dir.path()), "--dc-num-shards 2 2 2 --dc-shard-dims 2 3 4");
  std::map<std::string, fs::path> by_layout;  // "[1,1,1]" -> dataset root
  for (const auto& id : fs::directory_iterator(dir.path() / "data"))
    for (const auto& d : fs::directory_iterator(id.path())) {
      if (!d.is_directory()) continue;  // the key's .lock
      const std::string meta = core::read_file(d.path() / "meta.yaml");
      const auto p = meta.find("dc_num_shards: ");
      by_layout[meta.substr(p + 15, meta.find('\n', p) - p - 15)] = d.path();
    }
  ASSERT_EQ(by_layout.size(), 4u) << "each shard layout is its own cached dataset";
  const std::string script = R"PY(
import csv, glob, json, os, sys
import numpy as np
roots = dict(arg.split('=', 1) for arg in sys.argv[1:])
base = roots['[1,1,1]']
contents = {int(r[0]): [int(x) for x in r[1:]] for r in csv.reader(open(base + '/volumes_contents.csv'))}
split = {int(r[0]): r[1] for r in list(csv.reader(open(base + '/volumes_split.csv')))[1:]}
assert len(contents) == 8 and sorted(split.values()).count('validation') == 2
for name, root in roots.items():
    shards = json.loads(name)
    for v, s in split.items():
        vols = sorted(glob.glob(f'{root}/volumes/{s}/{v}_shard*.npy'))
        masks = sorted(glob.glob(f'{root}/masks/{s}/{v}_shard*_mask.npy'))
        assert len(vols) == len(masks) == int(np.prod(shards)), (name, v, vols)
        imgs = [np.load(f) for f in vols]
        msks = [np.load(f) for f in masks]
        for a, m in zip(imgs, msks):
            assert a.dtype == np.float32 and a.ndim == 4 and a.shape[0] == 3 and a.flags['C_CONTIGUOUS']
            assert m.dtype == np.uint16 and m.shape == a.shape[1:]
        # Reassemble: shard ids are row-major over (D, H, W) shards.
        nd, nh, nw = shards
        def grid(items, lead):
            return np.concatenate([np.concatenate([np.concatenate(
                [items[(i * nh + j) * nw + k] for k in range(nw)], axis=lead + 2)
                for j in range(nh)], axis=lead + 1) for i in range(nd)], axis=lead)
        img, msk = grid(imgs, 1), grid(msks, 0)
        ref_img = np.load(f'{base}/volumes/{s}/{v}_shard000000.npy')
        ref_msk = np.load(f'{base}/masks/{s}/{v}_shard000000_mask.npy')
        assert img.shape == (3, 16, 16, 16) and img.tobytes() == ref_img.tobytes(), (name, v)
        assert msk.tobytes() == ref_msk.tobytes(), (name, v)
        labels = set(np.unique(ref_msk).tolist()) - {0}
        allowed = {c + 1 for c in contents[v][0::2]}
        assert labels and labels <= allowed, (v, labels, allowed)
        fg = ref_msk > 0
        assert (ref_img[:, ~fg] == 0).all()
for s, name in (('training', 'train'), ('validation', 'val')):
    vals = json.load(open(f'{base}/{name}_unique_mask_vals.json'))['mask_values']
    expected = sorted({0} | {c + 1 for v, sp in split.items() if sp == s for c in contents[v][0::2]})
    assert vals == expected, (s, vals, expected)
print('numpy-ok')
)PY";
  std::ofstream(dir.path() / "check.py") << script;
  std::string cmd = std::string(SCAFFOLD_PYTHON) + " " + (dir.path() / "check.py").string();
  for (const auto& [layout, root] : by_layout) cmd += " '" + layout + "=" + root.string() + "'";
  const auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("numpy-ok"), std::string::npos) << r.output;
}

TEST(GenerateDataset, ReusedWhenTheKeyMatchesRegeneratedWhenItChanges) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  EXPECT_NE(generate(cfg).find("dataset: generating 8 volumes"), std::string::npos);
  const auto second = generate(cfg, "--threads 1");
  EXPECT_NE(second.find("dataset: reusing"), std::string::npos) << second;
  const auto other_seed = generate(cfg, "--seed 6");
  EXPECT_NE(other_seed.find("dataset: generating"), std::string::npos) << other_seed;
  int ids = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path() / "data")) ++ids;
  EXPECT_EQ(ids, 2);
}

TEST(GenerateDataset, KilledGenerationIsNeverReused) {
  TempDir dir;
  // Scale 7 (128^3, 29 MB per volume) so the run is still writing when it is killed.
  const fs::path cfg = write_config(dir.path(), "", 7);
  generate(cfg);  // the fractal library, so the killed run gets to the dataset quickly
  fs::remove_all(dir.path() / "data");
  // Kill once the first volume files are written.
  const int status =
      test::run_and_kill({"generate_dataset", "-c", cfg.string(), "--threads", "1"}, [&] {
        std::error_code ec;
        if (!fs::exists(dir.path() / "data", ec)) return false;
        for (auto it = fs::recursive_directory_iterator(dir.path() / "data", ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
          if (it->path().filename() == "0_shard000000.npy" ||
              it->path().filename() == "1_shard000000.npy")
            return true;
        return false;
      });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  const auto out = generate(cfg);
  EXPECT_NE(out.find("dataset: generating"), std::string::npos)
      << "an interrupted dataset was reused:\n"
      << out;
  EXPECT_EQ(snapshot(dataset_root(dir.path())).size(), 2u * 8u + 5u);
  // The killed run's folder (its owner gone) is removed by the next run, not a day later.
  EXPECT_NE(out.find("dataset: removed 1 generation folder(s) left by interrupted runs"),
            std::string::npos)
      << out;
  EXPECT_TRUE(test::temporaries_below(dir.path() / "data").empty());
}

TEST(GenerateDataset, ConfigErrorsAreClear) {
  TempDir dir;
  const auto r = run_command(kBinary + " generate_dataset -c " +
                             write_config(dir.path(), "val_split: 5\n").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("val_split"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "data"));
}

CommandResult generate_failing(const fs::path& cfg, const std::string& prefix = "") {
  const auto r = run_command(prefix + kBinary + " generate_dataset -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  return r;
}

// A reused dataset folder is checked against what its key gives before anything uses it (issue
// 16, item 6): a deleted training volume, a stray file and an edited meta.yaml each fail, naming
// the file; put back as it was, the dataset is reused again.
TEST(GenerateDataset, ReuseRefusesAFolderThatDiffersFromItsManifest) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  generate(cfg);
  const fs::path root = dataset_root(dir.path());
  fs::path volume;
  for (const auto& e : fs::directory_iterator(root / "volumes" / "training")) volume = e.path();
  ASSERT_FALSE(volume.empty());
  const std::string bytes = core::read_file(volume);

  fs::remove(volume);
  auto r = generate_failing(cfg);
  EXPECT_NE(r.output.find(root.string() + ": the dataset does not match its key and meta.yaml"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("missing volumes/training/" + volume.filename().string()),
            std::string::npos)
      << r.output;
  core::write_file_atomic(volume, bytes);

  core::write_file_atomic(root / "volumes" / "training" / "999_shard000000.npy", bytes);
  r = generate_failing(cfg);
  EXPECT_NE(r.output.find("extra file volumes/training/999_shard000000.npy"), std::string::npos)
      << r.output;
  fs::remove(root / "volumes" / "training" / "999_shard000000.npy");

  const std::string meta = core::read_file(root / "meta.yaml");
  std::string edited = meta;
  edited.replace(edited.find("n_train: 6"), 10, "n_train: 5");
  edited.replace(edited.find("n_volumes: 8"), 12, "n_volumes: 7");
  core::write_file_atomic(root / "meta.yaml", edited);
  r = generate_failing(cfg);
  EXPECT_NE(r.output.find("meta.yaml: edited after the dataset was written"), std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find("meta.yaml: 7 volumes (5 training, 2 validation), but the key gives 8 (6, 2)"),
      std::string::npos)
      << r.output;
  core::write_file_atomic(root / "meta.yaml", meta);

  const auto again = generate(cfg);
  EXPECT_NE(again.find("dataset: reusing " + root.string()), std::string::npos) << again;
}

// An instance cloud with a NaN point but a valid header is not voxelised (issue 16, item 5): the
// generation fails naming the file and the point, and leaves no dataset folder or temporary.
TEST(GenerateDataset, InstanceWithANanPointIsRefusedNamingTheFile) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  generate(cfg);
  fs::remove_all(dir.path() / "data");
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "lib")) {
    if (e.path().extension() != ".npy") continue;
    std::vector<int64_t> shape;
    std::vector<float> cloud = core::read_npy<float>(e.path(), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{16, 3}));
    cloud[5 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
    core::write_npy(e.path(), core::DType::Float32, shape, cloud.data());
  }
  const auto r = generate_failing(cfg);
  EXPECT_NE(r.output.find(".npy: point 5 is ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", nan, "), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find((dir.path() / "lib" / "var0.15" / "seed5" / "instances" / "np16").string()),
      std::string::npos)
      << r.output;
  EXPECT_TRUE(test::temporaries_below(dir.path()).empty());
  for (const auto& id : fs::directory_iterator(dir.path() / "data"))
    for (const auto& e : fs::directory_iterator(id.path()))
      EXPECT_EQ(e.path().filename(), ".lock") << "left behind: " << e.path();
}

// A write that fails (a file-size limit standing in for a full disk; issue 16, item 11) ends the
// run with the file and the reason, exit 1, and no temporary file or folder anywhere.
TEST(GenerateDataset, FailedWriteNamesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  // The library's files (16 points: 320 bytes) fit under 20 kB, a 16^3 volume (48 kB) does not.
  const auto r = generate_failing(cfg, "prlimit --fsize=20000 ");
  EXPECT_NE(r.output.find("_shard000000.npy: write failed: File too large"), std::string::npos)
      << r.output;
  EXPECT_TRUE(test::temporaries_below(dir.path()).empty());
  EXPECT_NE(r.output.find("dataset: removed the unfinished generation folder"), std::string::npos)
      << r.output;
  // With room, the same command goes ahead.
  generate(cfg);
}

// Two generations of one dataset started together (issue 16, item 9): the second waits on the
// key's lock, saying so with its path, then reuses what the first made; both succeed, and there
// is one dataset, byte-identical to a single run's. The test holds the lock (found from a
// reference run: the key's folder name) until both wait, so they overlap whatever the load.
TEST(GenerateDataset, TwoConcurrentGenerationsShareTheWork) {
  TempDir ref, dir;
  generate(write_config(ref.path()));
  const fs::path id = fs::directory_iterator(ref.path() / "data")->path().filename();
  const fs::path cfg = write_config(dir.path());
  const fs::path lock_path = dir.path() / "data" / id / ".lock";
  core::create_directories(lock_path.parent_path());
  std::optional<core::FileLock> held = core::FileLock::try_take(lock_path);
  ASSERT_TRUE(held && held->locked());

  const fs::path logs[2] = {dir.path() / "a.log", dir.path() / "b.log"};
  int codes[2] = {-1, -1};
  std::thread runs[2];
  for (int k = 0; k < 2; ++k)
    runs[k] = std::thread([&, k] {
      codes[k] =
          run_command(kBinary + " generate_dataset -c " + cfg.string() + " > " + logs[k].string())
              .exit_code;
    });
  const std::string waiting = "dataset: another process (" + core::owner_tag() +
                              ") holds the lock " + lock_path.string() + "; waiting";
  EXPECT_TRUE(test::every_log_says(logs, waiting)) << "the runs did not wait for the lock";
  held.reset();
  for (auto& t : runs) t.join();

  std::string out[2];
  for (int k = 0; k < 2; ++k) {
    out[k] = core::read_file(logs[k]);
    EXPECT_EQ(codes[k], 0) << out[k];
  }
  EXPECT_EQ(snapshot(dataset_root(dir.path())), snapshot(dataset_root(ref.path())));
  const int generated = (out[0].find("dataset: generating 8 volumes") != std::string::npos) +
                        (out[1].find("dataset: generating 8 volumes") != std::string::npos);
  const int reused = (out[0].find("dataset: reusing") != std::string::npos) +
                     (out[1].find("dataset: reusing") != std::string::npos);
  EXPECT_EQ(generated, 1) << out[0] << "\n---\n" << out[1];
  EXPECT_EQ(reused, 1) << out[0] << "\n---\n" << out[1];
  EXPECT_EQ(test::snapshot(dir.path() / "lib"), test::snapshot(ref.path() / "lib"));
}

}  // namespace
}  // namespace scaffold
