// End-to-end tests of `scaffold generate_fractals`, driving the real binary as users do:
// determinism across threads and MPI ranks (byte-identical trees), numpy reads our files,
// resume after deletion, corruption and kill -9, clear errors with the right exit codes, two
// concurrent runs on one library, and impossible category files dropped.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "fs_test_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::mpiexec;
using test::run_command;
using test::snapshot;
using test::TempDir;

// A small library: scale 5 (128 points per cloud), 2 categories -> 2 CSVs + 290 .npy files.
fs::path write_config(const fs::path& dir, int scale = 5, int categories = 2) {
  const fs::path cfg = dir / "fractals.yml";
  std::ofstream(cfg) << "problem_scale: " << scale << "\nn_categories: " << categories
                     << "\nfract_base_dir: " << (dir / "lib").string() << "\nseed: 7\n";
  return cfg;
}

std::string generate(const fs::path& cfg, const std::string& extra = "") {
  const auto r = run_command(kBinary + " generate_fractals -c " + cfg.string() + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(GenerateFractals, WritesTheSpecLayout) {
  TempDir dir;
  const auto out = generate(write_config(dir.path()), "--threads 2");
  const fs::path root = dir.path() / "lib" / "var0.15" / "seed7";
  EXPECT_TRUE(fs::is_regular_file(root / "3DIFS_param" / "000000.csv"));
  EXPECT_TRUE(fs::is_regular_file(root / "3DIFS_param" / "000001.csv"));
  EXPECT_FALSE(fs::exists(root / "3DIFS_param" / "000002.csv"));
  EXPECT_TRUE(fs::is_regular_file(root / "instances" / "np128" / "000001" / "000001_0144.npy"));
  EXPECT_EQ(snapshot(root).size(), 2u + 2u * 145u);
  EXPECT_NE(out.find("category search"), std::string::npos) << out;
  EXPECT_NE(out.find("wrote 290 files"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank=0][INFO]"), std::string::npos) << out;
}

TEST(GenerateFractals, ByteIdenticalForOneAndTwoThreads) {
  TempDir a, b;
  generate(write_config(a.path()), "--threads 1");
  generate(write_config(b.path()), "--threads 2");
  EXPECT_EQ(snapshot(a.path() / "lib"), snapshot(b.path() / "lib"));
}

TEST(GenerateFractals, ByteIdenticalForOneAndTwoMpiRanks) {
  TempDir a, b;
  generate(write_config(a.path()), "--threads 1");
  const auto r = run_command(mpiexec(2) + kBinary + " generate_fractals --threads 1 -c " +
                             write_config(b.path()).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(snapshot(a.path() / "lib"), snapshot(b.path() / "lib"));
}

TEST(GenerateFractals, NumpyReadsEveryFileWithTheRightDtypeAndShape) {
  TempDir dir;
  generate(write_config(dir.path()));
  const fs::path root = dir.path() / "lib" / "var0.15" / "seed7";
  const std::string script =
      "import numpy as np, glob, sys\n"
      "root = sys.argv[1]\n"
      "files = sorted(glob.glob(root + '/instances/np128/*/*.npy'))\n"
      "assert len(files) == 290, len(files)\n"
      "for f in files:\n"
      "    a = np.load(f)\n"
      "    assert a.dtype == np.float32 and a.shape == (128, 3) and a.flags['C_CONTIGUOUS'], f\n"
      "    assert np.isfinite(a).all() and (a[0] == 0).all(), f\n"
      "for f in sorted(glob.glob(root + '/3DIFS_param/*.csv')):\n"
      "    p = np.loadtxt(f, delimiter=',')\n"
      "    assert p.shape == (2, 13), (f, p.shape)\n"
      "    assert abs(p[:, 12].sum() - 1) < 1e-12, f\n"
      "print('numpy-ok', len(files))\n";
  std::ofstream(dir.path() / "check.py") << script;
  const auto r = run_command(std::string(SCAFFOLD_PYTHON) + " " +
                             (dir.path() / "check.py").string() + " " + root.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("numpy-ok 290"), std::string::npos) << r.output;
}

TEST(GenerateFractals, ResumeRegeneratesExactlyTheDeletedAndCorruptedFiles) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  generate(cfg);
  const fs::path lib = dir.path() / "lib";
  const fs::path inst = lib / "var0.15" / "seed7" / "instances" / "np128";
  const auto before = snapshot(lib);
  const fs::path deleted = inst / "000000" / "000000_0003.npy";
  const fs::path truncated = inst / "000001" / "000001_0100.npy";
  const fs::path untouched = inst / "000001" / "000001_0101.npy";
  const auto untouched_time = fs::last_write_time(untouched);
  fs::remove(deleted);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  // A leftover of a killed writer: its owner (this host, a pid that has ended) is provably gone.
  std::ofstream(
      inst / "000000" /
      ("000000_0004.npy.tmp." + std::to_string(test::dead_pid()) + "@" + core::owner_host() + ".0"))
      << "leftover of a killed writer";

  const auto out = generate(cfg);
  EXPECT_NE(out.find("generating 2 of 290"), std::string::npos) << out;
  EXPECT_NE(out.find("000001_0100.npy"), std::string::npos) << "the corrupt file is named: " << out;
  EXPECT_EQ(snapshot(lib), before);  // same bytes, and the leftover temporary file is gone
  EXPECT_EQ(fs::last_write_time(untouched), untouched_time) << "a valid file was rewritten";

  const auto again = generate(cfg);
  EXPECT_NE(again.find("all 290 present"), std::string::npos) << again;
}

TEST(GenerateFractals, KilledRunLeavesNothingARerunTrusts) {
  TempDir ref_dir, dir;
  // Scale 7 (8192 points per cloud) takes long enough to be killed mid-way.
  generate(write_config(ref_dir.path(), 7, 3));
  const fs::path cfg = write_config(dir.path(), 7, 3);
  // Kill once some instance files exist (or after 5 s at most).
  const fs::path inst = dir.path() / "lib" / "var0.15" / "seed7" / "instances" / "np8192";
  const int status =
      test::run_and_kill({"generate_fractals", "-c", cfg.string(), "--threads", "1"}, [&] {
        std::error_code ec;
        return fs::exists(inst / "000000" / "000000_0010.npy", ec);
      });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  generate(cfg);
  EXPECT_EQ(snapshot(dir.path() / "lib"), snapshot(ref_dir.path() / "lib"));
}

TEST(GenerateFractals, BadConfigIsOneClearErrorAndExitCodeOne) {
  TempDir dir;
  const fs::path cfg = dir.path() / "bad.yml";
  std::ofstream(cfg) << "problem_scale: -1\nfract_base_dir: " << (dir.path() / "lib").string()
                     << "\n";
  const auto r = run_command(kBinary + " generate_fractals -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("problem_scale"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(cfg.string()), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "lib")) << "something was written despite the error";

  // The same under two ranks: both exit non-zero, the message is printed once.
  const auto m = run_command(mpiexec(2) + kBinary + " generate_fractals -c " + cfg.string());
  EXPECT_NE(m.exit_code, 0) << m.output;
  EXPECT_NE(m.output.find("problem_scale"), std::string::npos) << m.output;
}

TEST(GenerateFractals, UsageErrorsExitTwoAndFlagsOverrideTheConfig) {
  TempDir dir;
  EXPECT_EQ(run_command(kBinary + " generate_fractals").exit_code, 2);
  EXPECT_EQ(run_command(kBinary + " generate_fractals -c x.yml --no-such-flag").exit_code, 2);
  EXPECT_EQ(run_command(kBinary).exit_code, 2);
  const auto help = run_command(kBinary + " generate_fractals --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--datagen-batch-size"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--threads"), std::string::npos) << help.output;
  const auto version = run_command(kBinary + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("commit"), std::string::npos) << version.output;

  // --n-categories and --fract-base-dir beat the file.
  generate(write_config(dir.path()),
           "--n-categories 1 --fract-base-dir " + (dir.path() / "other").string());
  EXPECT_TRUE(
      fs::exists(dir.path() / "other" / "var0.15" / "seed7" / "3DIFS_param" / "000000.csv"));
  EXPECT_FALSE(
      fs::exists(dir.path() / "other" / "var0.15" / "seed7" / "3DIFS_param" / "000001.csv"));
  EXPECT_FALSE(fs::exists(dir.path() / "lib"));
}

// A threshold below normalize^2 but above what candidates reach (at scale 4, 16 points, almost
// no cloud has a per-axis variance above 0.99 of the bound) used to search forever without a
// word; it now gives up after 100000 attempts per category, saying why (issue 16, item 3).
TEST(GenerateFractals, UnreachableThresholdFailsWithTheRejectionCounts) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const fs::path cfg = write_config(dir.path(), 4);
  std::ofstream(cfg, std::ios::app) << "variance_threshold: 0.99\n";
  const auto r = run_command(kBinary + " generate_fractals -c " + cfg.string());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("category search: only 0 of 2 categories passed after "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Lower variance_threshold"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 120.0);
  // At normalize^2 itself the config is refused before any search.
  const fs::path bound_cfg = write_config(dir.path(), 4);
  std::ofstream(bound_cfg, std::ios::app) << "variance_threshold: 1\n";
  const auto at_bound = run_command(kBinary + " generate_fractals -c " + bound_cfg.string());
  EXPECT_EQ(at_bound.exit_code, 1) << at_bound.output;
  EXPECT_NE(at_bound.output.find("variance_threshold = 1"), std::string::npos) << at_bound.output;
  EXPECT_NE(at_bound.output.find("below normalize^2 = 1.0"), std::string::npos) << at_bound.output;
}

// A writer that is still running (here: a process holding the flock of its temporary, as every
// writer does while it writes) keeps its temporary through another run's clean-up; the dead
// writer's goes (issue 16, item 9).
TEST(GenerateFractals, CleanUpKeepsALiveWritersTemporary) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  generate(cfg);
  const fs::path sub = dir.path() / "lib" / "var0.15" / "seed7" / "instances" / "np128" / "000000";
  const fs::path unowned = sub / "000000_0001.npy.partial";
  std::ofstream(unowned) << "being written";
  test::LockHolder writer(unowned);
  ASSERT_TRUE(writer.held());
  const fs::path live = sub / ("000000_0001.npy.tmp." + std::to_string(writer.pid()) + "@" +
                               core::owner_host() + ".3");
  fs::rename(unowned, live);
  const fs::path dead = sub / ("000000_0002.npy.tmp." + std::to_string(test::dead_pid()) + "@" +
                               core::owner_host() + ".3");
  std::ofstream(dead) << "left by a killed writer";

  const auto out = generate(cfg);
  EXPECT_TRUE(fs::exists(live)) << "a live writer's temporary was removed:\n" << out;
  EXPECT_FALSE(fs::exists(dead)) << out;
  EXPECT_NE(out.find("removed 1 temporary file(s)"), std::string::npos) << out;
  EXPECT_NE(
      out.find("kept 1 temporary file(s) of writers that may still run (e.g. " + live.string()),
      std::string::npos)
      << out;
}

// Two runs on one library started together (issue 16, item 9): the library's lock makes the
// second wait, saying so with the lock's path, then find the work done; both succeed and the
// library is byte-identical to one run's. The test holds the lock until both are waiting, so
// that both really overlap whatever the machine's load.
TEST(GenerateFractals, TwoConcurrentRunsShareTheWork) {
  TempDir ref, dir;
  generate(write_config(ref.path()));
  const fs::path cfg = write_config(dir.path());
  const fs::path lock_path = dir.path() / "lib" / "var0.15" / "seed7.lock";
  core::create_directories(lock_path.parent_path());
  std::optional<core::FileLock> held = core::FileLock::try_take(lock_path);
  ASSERT_TRUE(held && held->locked());

  const fs::path logs[2] = {dir.path() / "a.log", dir.path() / "b.log"};
  int codes[2] = {-1, -1};
  std::thread runs[2];
  for (int k = 0; k < 2; ++k)
    runs[k] = std::thread([&, k] {
      codes[k] =
          run_command(kBinary + " generate_fractals -c " + cfg.string() + " > " + logs[k].string())
              .exit_code;
    });
  const std::string waiting = "generate_fractals: another process (" + core::owner_tag() +
                              ") holds the lock " + lock_path.string() +
                              "; waiting for it to finish";
  EXPECT_TRUE(test::every_log_says(logs, waiting)) << "the runs did not wait for the lock";
  held.reset();
  for (auto& t : runs) t.join();

  std::string out[2];
  for (int k = 0; k < 2; ++k) {
    out[k] = core::read_file(logs[k]);
    EXPECT_EQ(codes[k], 0) << out[k];
  }
  EXPECT_EQ(snapshot(dir.path() / "lib"), snapshot(ref.path() / "lib"));
  // One generated everything; the other waited for it (again) and reused it all.
  const int generated = (out[0].find("wrote 290 files") != std::string::npos) +
                        (out[1].find("wrote 290 files") != std::string::npos);
  const int reused = (out[0].find("instances: all 290 present") != std::string::npos) +
                     (out[1].find("instances: all 290 present") != std::string::npos);
  EXPECT_EQ(generated, 1) << out[0] << "\n---\n" << out[1];
  EXPECT_EQ(reused, 1) << out[0] << "\n---\n" << out[1];
}

// A category CSV with an impossible value (a negative probability) is never used (issue 16, item
// 5): it is dropped with a warning naming the file, the line and the rule, generated again from
// the seed (the same bytes as before the edit), and its instances with it.
TEST(GenerateFractals, ImpossibleCategoryCsvIsDroppedWithAWarningAndRegenerated) {
  TempDir dir;
  const fs::path cfg = write_config(dir.path());
  generate(cfg);
  const fs::path lib = dir.path() / "lib";
  const auto before = snapshot(lib);
  const fs::path csv = lib / "var0.15" / "seed7" / "3DIFS_param" / "000001.csv";
  std::string text = core::read_file(csv);
  const auto end_of_first = text.find('\n');
  const auto last_comma = text.rfind(',', end_of_first);
  text.replace(last_comma + 1, end_of_first - last_comma - 1, "-5.000000000000000000e-01");
  core::write_file_atomic(csv, text);

  const auto out = generate(cfg);
  EXPECT_NE(out.find("category file unusable, dropped: " + csv.string() +
                     ": line 1, value 13 (the probability of map 0): -0.5 is outside [0, 1]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("generating 145 of 290"), std::string::npos)
      << "its instances are regenerated:\n"
      << out;
  EXPECT_EQ(snapshot(lib), before);
}

}  // namespace
}  // namespace scaffold
