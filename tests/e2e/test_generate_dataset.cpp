// End-to-end tests of `scaffold generate_dataset`: byte-identical across threads and ranks,
// numpy reads every file with the right dtype and shape, sharded files concatenate to the
// unsharded volume, mask values match the contents table, and the cache is reused, keyed, and
// never serves an interrupted generation.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
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
std::map<std::string, std::string> snapshot(const fs::path& root) { return test::snapshot(root, "meta.yaml"); }

// The one finished dataset folder under <dir>/data/<id>/.
fs::path dataset_root(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& id : fs::directory_iterator(dir / "data"))
    for (const auto& d : fs::directory_iterator(id.path()))
      if (d.path().filename().string().rfind(".tmp_", 0) != 0) found.push_back(d.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}

std::string generate(const fs::path& cfg, const std::string& extra = "", const std::string& launcher = "") {
  const auto r = run_command(launcher + kBinary + " generate_dataset -c " + cfg.string() + " " + extra);
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
  const int status = test::run_and_kill({"generate_dataset", "-c", cfg.string(), "--threads", "1"}, [&] {
    std::error_code ec;
    if (!fs::exists(dir.path() / "data", ec)) return false;
    for (auto it = fs::recursive_directory_iterator(dir.path() / "data", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->path().filename() == "0_shard000000.npy" || it->path().filename() == "1_shard000000.npy")
        return true;
    return false;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  const auto out = generate(cfg);
  EXPECT_NE(out.find("dataset: generating"), std::string::npos) << "an interrupted dataset was reused:\n" << out;
  EXPECT_EQ(snapshot(dataset_root(dir.path())).size(), 2u * 8u + 5u);
}

TEST(GenerateDataset, ConfigErrorsAreClear) {
  TempDir dir;
  const auto r = run_command(kBinary + " generate_dataset -c " + write_config(dir.path(), "val_split: 5\n").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("val_split"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "data"));
}

}  // namespace
}  // namespace scaffold
