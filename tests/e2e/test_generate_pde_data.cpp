// End-to-end tests of `scaffold generate_pde_data`: byte-identical across threads and ranks,
// numpy reads every file with the shapes meta.json states and recomputes its statistics, reruns
// reuse and key changes regenerate, a run killed with SIGKILL is resumed (never served) and ends
// byte-identical to an uninterrupted one, and config errors are one clear message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/fs.hpp"
#include "core/npy.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

const char* kNavierStokes =
    "problem: navier_stokes2d\ngrid: [16, 16]\ntrain_samples: 4\nval_samples: 2\n"
    "t_in: 2\nt_out: 3\nns_record_interval: 0.1\nns_dt: 0.05\nseed: 3\n";
const char* kBurgers =
    "problem: burgers1d\ngrid: [32]\ntrain_samples: 4\nval_samples: 2\nt_out: 2\n"
    "burgers_solver_refinement: 2\nburgers_final_time: 0.1\nburgers_dt: 0.01\n";
const char* kRbc =
    "problem: rbc2d\ngrid: [16, 9]\ntrain_samples: 9\nval_samples: 3\nt_in: 1\nt_out: 1\n"
    "rbc_rayleigh: 1e4\nrbc_aspect: 2\nrbc_dt: 0.05\nrbc_spinup_time: 0.5\n"
    "rbc_states: 4\nrbc_noise_amplitude: 0.1\n";

fs::path write_config(const fs::path& dir, const std::string& body) {
  const fs::path cfg = dir / "pde.yml";
  std::ofstream(cfg) << body << "data_dir: " << (dir / "data").string() << "\n";
  return cfg;
}

std::string generate(const fs::path& cfg, const std::string& extra = "",
                     const std::string& launcher = "") {
  const auto r =
      run_command(launcher + kBinary + " generate_pde_data -c " + cfg.string() + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

// The finished dataset folders below <dir>/data/fno_<problem>/.
std::vector<fs::path> datasets(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& p : fs::directory_iterator(dir / "data", ec))
    for (const auto& d : fs::directory_iterator(p.path()))
      if (d.is_directory() && d.path().extension() != ".partial") found.push_back(d.path());
  return found;
}
fs::path only_dataset(const fs::path& dir) {
  const auto found = datasets(dir);
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}
std::map<std::string, std::string> snapshot(const fs::path& root) {
  return test::snapshot(root, "meta.json");
}

TEST(GeneratePdeData, ByteIdenticalForThreadsAndRanks) {
  for (const char* body : {kNavierStokes, kRbc}) {
    TempDir a, b, c;
    generate(write_config(a.path(), body), "--threads 1");
    generate(write_config(b.path(), body), "--threads 2");
    generate(write_config(c.path(), body), "--threads 1", test::mpiexec(2));
    const auto ref = snapshot(only_dataset(a.path()));
    EXPECT_GE(ref.size(), 5u);
    EXPECT_EQ(snapshot(only_dataset(b.path())), ref) << "2 threads\n" << body;
    EXPECT_EQ(snapshot(only_dataset(c.path())), ref) << "2 ranks\n" << body;
  }
}

TEST(GeneratePdeData, NumpyReadsTheFilesAndRecomputesTheStatistics) {
  TempDir dir;
  for (const char* body : {kBurgers, kNavierStokes, kRbc})
    generate(write_config(dir.path(), body), "--threads 2");
  const std::string script = R"PY(
import glob, json, os, sys
import numpy as np
for root in sys.argv[1:]:
    m = json.load(open(os.path.join(root, 'meta.json')))
    lay = m['layout']
    for split, n in (('train', m['train_samples']), ('val', m['val_samples'])):
        for i in range(n):
            for f in lay['files_per_sample']:
                a = np.load(os.path.join(root, split, '%06d_%s.npy' % (i, f['name'])))
                assert a.dtype == np.float32 and a.flags['C_CONTIGUOUS'], (root, f)
                assert list(a.shape) == f['shape'], (root, f, a.shape)
                assert np.isfinite(a).all()
    files = lay['files_per_sample']
    train = [[np.load(os.path.join(root, 'train', '%06d_%s.npy' % (i, f['name']))).astype(np.float64)
              for f in files] for i in range(m['train_samples'])]
    if len(files) == 1:  # trajectories (states, 4, nx, nz): inputs all but the last state
        x = np.concatenate([t[0][:-1] for t in train]); y = np.concatenate([t[0][1:] for t in train])
        x = x.transpose(1, 0, 2, 3).reshape(4, -1); y = y.transpose(1, 0, 2, 3).reshape(4, -1)
        assert (x[2].min() >= -0.2) and abs(y[0]).max() > 0, 'buoyancy near [0, 1], some flow'
    else:
        x = np.concatenate([t[0][None] for t in train]); y = np.concatenate([t[1][None] for t in train])
        x = x.transpose(1, 0, *range(2, x.ndim)).reshape(x.shape[1], -1)
        y = y.transpose(1, 0, *range(2, y.ndim)).reshape(y.shape[1], -1)
    for got, ref in ((m['input_stats'], x), (m['target_stats'], y)):
        assert np.allclose(got['mean'], ref.mean(axis=1), rtol=1e-9, atol=1e-12), (root, got['mean'], ref.mean(axis=1))
        assert np.allclose(got['std'], ref.std(axis=1), rtol=1e-7, atol=1e-12), (root, got['std'], ref.std(axis=1))
    print('ok', m['problem'], m['train_examples'], m['val_examples'])
print('numpy-ok')
)PY";
  std::ofstream(dir.path() / "check.py") << script;
  std::string cmd = std::string(SCAFFOLD_PYTHON) + " " + (dir.path() / "check.py").string();
  const auto found = datasets(dir.path());
  ASSERT_EQ(found.size(), 3u);
  for (const auto& root : found) cmd += " " + root.string();
  const auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("numpy-ok"), std::string::npos) << r.output;
  // 3 trajectories of 3 examples
  EXPECT_NE(r.output.find("ok rbc2d 9 3"), std::string::npos) << r.output;
}

TEST(GeneratePdeData, RerunsReuseAndKeyChangesRegenerate) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path(), kBurgers);
  EXPECT_NE(generate(cfg).find("fno data: generating 6 of 6 samples"), std::string::npos);
  const auto again = generate(cfg, "--threads 2");
  EXPECT_NE(again.find("fno data: reusing"), std::string::npos) << again;
  const auto other = generate(cfg, "--seed 6");
  EXPECT_NE(other.find("fno data: generating"), std::string::npos) << other;
  const auto flag = generate(cfg, "--viscosity 0.05");
  EXPECT_NE(flag.find("nu 0.05"), std::string::npos) << flag;
  EXPECT_EQ(datasets(dir.path()).size(), 3u);
}

TEST(GeneratePdeData, AKilledRunIsNeverServedAndResumesToTheSameBytes) {
  // 8 trajectories of ~0.3 s each, one thread: still running when its first files appear.
  const std::string body =
      "problem: rbc2d\ngrid: [32, 17]\ntrain_samples: 28\nval_samples: 4\nrbc_rayleigh: "
      "1e5\nrbc_dt: 0.02\n"
      "rbc_spinup_time: 6\nrbc_states: 5\nrbc_noise_amplitude: 0.01\n";
  TempDir killed, clean;
  const fs::path cfg = write_config(killed.path(), body);
  const int status = test::run_and_kill(
      {"generate_pde_data", "-c", cfg.string(), "--threads", "1"},
      [&] {
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(killed.path() / "data", ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
          if (it->path().filename() == "000001_states.npy") return true;
        return false;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  EXPECT_TRUE(datasets(killed.path()).empty()) << "no dataset under a final name after a kill";
  const auto out = generate(cfg);
  EXPECT_NE(out.find("fno data: resuming"), std::string::npos) << out;
  generate(write_config(clean.path(), body));
  EXPECT_EQ(snapshot(only_dataset(killed.path())), snapshot(only_dataset(clean.path())));
}

// Overwrites element `k` of a float32 .npy in place (same size, header untouched); returns the
// value it held.
float poke_float(const fs::path& file, int64_t k, float value) {
  const core::NpyInfo info = core::read_npy_info(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(info.data_offset + 4 * static_cast<std::size_t>(k));
  float old = 0.0f;
  f.seekg(at);
  f.read(reinterpret_cast<char*>(&old), sizeof old);
  f.seekp(at);
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
  EXPECT_TRUE(f.good()) << file;
  return old;
}

TEST(GeneratePdeData, AnEditedOrNonFiniteCacheFileIsRefusedNamingIt) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path(), kBurgers);
  generate(cfg);
  const fs::path file = only_dataset(dir.path()) / "val" / "000000_target.npy";
  const float kept = poke_float(file, 10, 0.125f);
  const auto edited = run_command(kBinary + " generate_pde_data -c " + cfg.string());
  EXPECT_EQ(edited.exit_code, 1) << edited.output;
  EXPECT_NE(edited.output.find("val/000000_target.npy"), std::string::npos) << edited.output;
  EXPECT_NE(edited.output.find("SHA-256"), std::string::npos) << edited.output;
  poke_float(file, 10, kept);
  EXPECT_NE(generate(cfg).find("fno data: reusing"), std::string::npos) << "restored, reused";
  poke_float(file, 11, std::numeric_limits<float>::quiet_NaN());
  const auto nan = run_command(kBinary + " generate_pde_data -c " + cfg.string());
  EXPECT_EQ(nan.exit_code, 1) << nan.output;
  EXPECT_NE(nan.output.find("val/000000_target.npy"), std::string::npos) << nan.output;
  EXPECT_NE(nan.output.find("nan"), std::string::npos) << nan.output;
}

TEST(GeneratePdeData, ADamagedMetaJsonIsGeneratedAgainAndLeavesNoPartialFolder) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path(), kBurgers);
  generate(cfg);
  const fs::path root = only_dataset(dir.path());
  const auto reference = snapshot(root);
  fs::resize_file(root / "meta.json", fs::file_size(root / "meta.json") / 3);
  const auto out = generate(cfg);
  EXPECT_NE(out.find("meta.json"), std::string::npos) << "the warning names the file: " << out;
  EXPECT_NE(out.find("fno data: generating 6 of 6 samples"), std::string::npos) << out;
  EXPECT_EQ(snapshot(only_dataset(dir.path())), reference);
  EXPECT_FALSE(fs::exists(root.string() + ".partial"));
  EXPECT_NE(generate(cfg).find("fno data: reusing"), std::string::npos);
}

TEST(GeneratePdeData, ConfigErrorsAreClear) {
  TempDir dir;
  const auto r =
      run_command(kBinary + " generate_pde_data -c " +
                  write_config(dir.path(), "problem: navier_stokes2d\ngrid: [16, 8]\n").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("grid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[N, N]"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "data"));
  const auto flag = run_command(kBinary + " generate_pde_data -c " +
                                write_config(dir.path(), kRbc).string() + " --rbc-rayleigh -5");
  EXPECT_EQ(flag.exit_code, 1) << flag.output;
  EXPECT_NE(flag.output.find("rbc_rayleigh"), std::string::npos) << flag.output;
  EXPECT_FALSE(fs::exists(dir.path() / "data"));
}

}  // namespace
}  // namespace scaffold
