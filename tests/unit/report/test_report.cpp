// The report module: run-folder naming and collisions, train_stats.csv text and resume
// truncation, restart.sh text and the argv a real bash run of it delivers, and the figures.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "report/figures.hpp"
#include "report/restart.hpp"
#include "report/run_dir.hpp"
#include "report/train_stats.hpp"
#include "test_util.hpp"

namespace scaffold::report {
namespace {
namespace fs = std::filesystem;

std::chrono::system_clock::time_point local_time(int year, int month, int day, int hour, int min,
                                                 int sec) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------- run dir

TEST(RunDir, NameIsJobAndLocalTimestampAndParentsAreCreated) {
  test::TempDir tmp;
  const auto now = local_time(2024, 3, 5, 7, 8, 9);
  EXPECT_EQ(run_dir_name("benchmark", now), "benchmark_20240305-070809");
  const fs::path base = tmp.path() / "a" / "runs";
  const fs::path dir = create_run_dir(base, "benchmark", now);
  EXPECT_EQ(dir, base / "benchmark_20240305-070809");
  EXPECT_TRUE(fs::is_directory(dir));
}

TEST(RunDir, CollisionsGetDashSuffixes) {
  test::TempDir tmp;
  const auto now = local_time(2023, 12, 31, 23, 59, 58);
  const fs::path first = create_run_dir(tmp.path(), "job", now);
  const fs::path second = create_run_dir(tmp.path(), "job", now);
  const fs::path third = create_run_dir(tmp.path(), "job", now);
  EXPECT_EQ(first.filename(), "job_20231231-235958");
  EXPECT_EQ(second.filename(), "job_20231231-235958-1");
  EXPECT_EQ(third.filename(), "job_20231231-235958-2");
  EXPECT_TRUE(fs::is_directory(second));
  EXPECT_TRUE(fs::is_directory(third));
}

TEST(RunDir, ErrorsNameThePathOrTheJobName) {
  test::TempDir tmp;
  const fs::path blocker = tmp.path() / "not-a-dir";
  core::write_file_atomic(blocker, std::string("x"));
  const auto now = local_time(2024, 1, 2, 3, 4, 5);
  try {
    create_run_dir(blocker, "benchmark", now);
    FAIL() << "a run dir under a regular file was created";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), blocker.string())) << e.what();
  }
  EXPECT_THROW(create_run_dir(tmp.path(), "a/b", now), core::Error);
  EXPECT_THROW(create_run_dir(tmp.path(), "", now), core::Error);
}

// ------------------------------------------------------------------------------ train stats

const std::string kHeader =
    "epoch,epoch_loss,overall_loss,val_loss_epoch,val_loss_avg,train_dice,val_dice,"
    "epoch_duration,optimizer_steps,total_optimizer_steps";

EpochRecord record_for(int64_t epoch, double scale = 1.0) {
  EpochRecord r;
  r.epoch = epoch;
  r.epoch_loss = 10.0 * scale / static_cast<double>(epoch);
  r.overall_loss = scale / static_cast<double>(epoch);
  r.val_loss_epoch = 3.0 * scale;
  r.val_loss_avg = 0.75 * scale;
  r.train_dice = 0.1 * static_cast<double>(epoch);
  r.val_dice = 0.05 * static_cast<double>(epoch);
  r.epoch_duration_s = 1.5 + static_cast<double>(epoch);
  r.optimizer_steps = 4;
  r.total_optimizer_steps = 4 * epoch;
  return r;
}

TEST(TrainStats, FreshFileHasExactlyTheHeader) {
  test::TempDir tmp;
  core::write_file_atomic(tmp.path() / "train_stats.csv", std::string("old,stuff\n1,2\n"));
  const TrainStatsCsv csv = TrainStatsCsv::open_fresh(tmp.path());
  EXPECT_EQ(csv.path(), tmp.path() / "train_stats.csv");
  EXPECT_EQ(train_stats_header(), kHeader);
  EXPECT_EQ(core::read_file(tmp.path() / "train_stats.csv"), kHeader + "\n");
}

TEST(TrainStats, RowIsPythonStrOfEachValue) {
  test::TempDir tmp;
  EpochRecord r;
  r.epoch = 2;
  r.epoch_loss = 0.1;
  r.overall_loss = 1.0;
  r.val_loss_epoch = 2.0;
  r.val_loss_avg = 0.5;
  r.train_dice = 0.25;
  r.val_dice = 1e-05;
  r.epoch_duration_s = 12.345678901234567;
  r.optimizer_steps = 2;
  r.total_optimizer_steps = 17;
  const std::string expected = "2,0.1,1.0,2.0,0.5,0.25,1e-05,12.345678901234567,2,17";
  EXPECT_EQ(train_stats_row(r), expected);
  {
    TrainStatsCsv csv = TrainStatsCsv::open_fresh(tmp.path());
    csv.append(r);
    // Flushed per row: the text is on disk before the writer is closed.
    EXPECT_EQ(core::read_file(csv.path()), kHeader + "\n" + expected + "\n");
  }
}

TEST(TrainStats, ResumeKeepsEarlierRowsAndDropsTheRest) {
  test::TempDir tmp;
  {
    TrainStatsCsv csv = TrainStatsCsv::open_fresh(tmp.path());
    for (int64_t e = 1; e <= 5; ++e) csv.append(record_for(e));
  }
  {
    TrainStatsCsv csv = TrainStatsCsv::open_resume(tmp.path(), 3);
    EXPECT_EQ(core::read_file(csv.path()), kHeader + "\n" + train_stats_row(record_for(1)) + "\n" +
                                               train_stats_row(record_for(2)) + "\n");
    csv.append(record_for(3, 2.0));
  }
  const std::vector<EpochRecord> back = read_train_stats(tmp.path() / "train_stats.csv");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].epoch, 1);
  EXPECT_EQ(back[1].epoch, 2);
  EXPECT_EQ(back[2].epoch, 3);
  EXPECT_EQ(back[2].val_loss_avg, 1.5);  // the new epoch 3, not the dropped one (0.75)
}

// Resuming at epoch 1 (a checkpoint of no epoch) needs no history; resuming later without the
// file used to start it afresh, and the resumed run then reported only the time since the
// restart as its time to solution (issue 16, item 8).
TEST(TrainStats, ResumeWithoutAFileIsRefusedUnlessNothingWasTrained) {
  test::TempDir tmp;
  const fs::path path = tmp.path() / "train_stats.csv";
  try {
    TrainStatsCsv::open_resume(tmp.path(), 4);
    FAIL() << "resumed at epoch 4 without a history";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), path.string() + ": missing, but the checkpoint is at epoch 3"))
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path)) << "nothing is written before refusing";
  const TrainStatsCsv csv = TrainStatsCsv::open_resume(tmp.path(), 1);
  EXPECT_EQ(core::read_file(csv.path()), kHeader + "\n");
}

// Rows cut short, or of another run (step counts not the checkpoint's), are refused and the
// file is left as it was.
TEST(TrainStats, ResumeRefusesAHistoryThatDoesNotReachTheCheckpoint) {
  test::TempDir tmp;
  const fs::path path = tmp.path() / "train_stats.csv";
  const std::string two_rows = kHeader + "\n" + train_stats_row(record_for(1)) + "\n" +
                               train_stats_row(record_for(2)) + "\n";
  core::write_file_atomic(path, two_rows);
  try {
    TrainStatsCsv::open_resume(tmp.path(), 5);
    FAIL() << "resumed at epoch 5 with rows up to epoch 2";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), "holds epochs up to 2 but the checkpoint is at epoch 4"))
        << e.what();
  }
  EXPECT_EQ(core::read_file(path), two_rows);
  // record_for(2) has total_optimizer_steps 8; a checkpoint with 9 is of another run.
  try {
    TrainStatsCsv::open_resume(tmp.path(), 3, 9);
    FAIL() << "resumed with step counts that differ from the checkpoint's";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), "total_optimizer_steps 8 but the checkpoint has 9")) << e.what();
  }
  EXPECT_EQ(core::read_file(path), two_rows);
  const TrainStatsCsv csv = TrainStatsCsv::open_resume(tmp.path(), 3, 8);
  EXPECT_EQ(core::read_file(csv.path()), two_rows);
}

// A torn row is the one being written when the run died, before its epoch's checkpoint: the
// checkpoint is of the epoch before it.
TEST(TrainStats, ResumeDropsATornLastLine) {
  test::TempDir tmp;
  const std::string row1 = train_stats_row(record_for(1));
  core::write_file_atomic(tmp.path() / "train_stats.csv", kHeader + "\n" + row1 + "\n2,0.5,0.");
  const TrainStatsCsv csv = TrainStatsCsv::open_resume(tmp.path(), 2);
  EXPECT_EQ(core::read_file(csv.path()), kHeader + "\n" + row1 + "\n");
}

// Each row of train_stats.csv is checked when read (issue 16, item 10): the report adds up
// durations and finds the first epoch at the target, so a bad row would be a wrong figure of
// merit. Each case names the file and the line (line 1 is the header).
TEST(TrainStats, ImpossibleRowsAreErrorsNamingFileAndLine) {
  test::TempDir tmp;
  const fs::path path = tmp.path() / "train_stats.csv";
  auto row = [](int64_t epoch, auto edit) {
    EpochRecord r = record_for(epoch);
    edit(r);
    return train_stats_row(r) + "\n";
  };
  auto same = [](EpochRecord&) {};
  struct Case {
    std::string name, text, expected;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"negative duration",
       row(1, same) + row(2, [](EpochRecord& r) { r.epoch_duration_s = -3.0; }),
       "line 3: epoch_duration -3.0"},
      {"NaN duration", row(1, [&](EpochRecord& r) { r.epoch_duration_s = nan; }),
       "line 2: epoch_duration nan"},
      {"missing epoch", row(1, same) + row(3, [](EpochRecord& r) { r.total_optimizer_steps = 8; }),
       "line 3: epoch 3 where epoch 2 was expected"},
      {"duplicate epoch",
       row(1, same) + row(1, [](EpochRecord& r) { r.total_optimizer_steps = 8; }),
       "line 3: epoch 1 where epoch 2 was expected"},
      {"out of order", row(2, [](EpochRecord& r) { r.total_optimizer_steps = 4; }) + row(1, same),
       "line 2: epoch 2 where epoch 1 was expected"},
      {"Dice 7.5", row(1, same) + row(2, [](EpochRecord& r) { r.val_dice = 7.5; }),
       "line 3: val_dice 7.5"},
      {"negative Dice", row(1, [](EpochRecord& r) { r.train_dice = -0.5; }),
       "line 2: train_dice -0.5"},
      {"steps do not add up",
       row(1, same) + row(2, [](EpochRecord& r) { r.total_optimizer_steps = 100; }),
       "line 3: total_optimizer_steps 100 is not the previous row's 4 + optimizer_steps 4"},
  };
  for (const Case& c : cases) {
    core::write_file_atomic(path, kHeader + "\n" + c.text);
    try {
      const auto rows = read_train_stats(path);
      ADD_FAILURE() << c.name << ": accepted " << rows.size() << " rows";
    } catch (const core::FileError& e) {
      EXPECT_TRUE(contains(e.what(), path.string() + ": " + c.expected))
          << c.name << ": " << e.what();
    }
  }
  // NaN losses and a NaN Dice are what a diverged epoch records: kept, not refused.
  core::write_file_atomic(path, kHeader + "\n" + row(1, [&](EpochRecord& r) {
                                  r.overall_loss = nan;
                                  r.train_dice = nan;
                                }));
  EXPECT_EQ(read_train_stats(path).size(), 1u);
}

TEST(TrainStats, RoundTripIsExact) {
  test::TempDir tmp;
  std::vector<EpochRecord> records;
  for (int64_t e = 1; e <= 4; ++e) records.push_back(record_for(e, 1.0 / 3.0));
  records[1].overall_loss = 1e-300;
  records[2].epoch_loss = 123456789.125;
  records[3].val_loss_epoch = std::numeric_limits<double>::quiet_NaN();
  records[3].total_optimizer_steps = int64_t{1} << 40;  // steps that add up to it (item 10's check)
  records[3].optimizer_steps = (int64_t{1} << 40) - records[2].total_optimizer_steps;
  {
    TrainStatsCsv csv = TrainStatsCsv::open_fresh(tmp.path());
    for (const EpochRecord& r : records) csv.append(r);
  }
  const std::vector<EpochRecord> back = read_train_stats(tmp.path() / "train_stats.csv");
  ASSERT_EQ(back.size(), records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const EpochRecord& a = records[i];
    const EpochRecord& b = back[i];
    EXPECT_EQ(a.epoch, b.epoch) << "row " << i;
    EXPECT_EQ(a.epoch_loss, b.epoch_loss) << "row " << i;
    EXPECT_EQ(a.overall_loss, b.overall_loss) << "row " << i;
    if (std::isnan(a.val_loss_epoch)) {
      EXPECT_TRUE(std::isnan(b.val_loss_epoch)) << "row " << i;
    } else {
      EXPECT_EQ(a.val_loss_epoch, b.val_loss_epoch) << "row " << i;
    }
    EXPECT_EQ(a.val_loss_avg, b.val_loss_avg) << "row " << i;
    EXPECT_EQ(a.train_dice, b.train_dice) << "row " << i;
    EXPECT_EQ(a.val_dice, b.val_dice) << "row " << i;
    EXPECT_EQ(a.epoch_duration_s, b.epoch_duration_s) << "row " << i;
    EXPECT_EQ(a.optimizer_steps, b.optimizer_steps) << "row " << i;
    EXPECT_EQ(a.total_optimizer_steps, b.total_optimizer_steps) << "row " << i;
  }
}

TEST(TrainStats, WrongHeaderIsAnErrorNamingTheFile) {
  test::TempDir tmp;
  const fs::path path = tmp.path() / "train_stats.csv";
  // ScaFFold's older 8-column file.
  core::write_file_atomic(path, std::string("epoch,epoch_loss,overall_loss,val_loss_epoch,"
                                            "val_loss_avg,train_dice,val_dice,epoch_duration\n"
                                            "1,1.0,1.0,1.0,1.0,0.1,0.1,2.0\n"));
  try {
    TrainStatsCsv::open_resume(tmp.path(), 2);
    FAIL() << "resume accepted a different header";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), path.string())) << e.what();
  }
  EXPECT_THROW(read_train_stats(path), core::FileError);
}

TEST(TrainStats, BadRowIsAnErrorNamingFileAndLine) {
  test::TempDir tmp;
  const fs::path path = tmp.path() / "train_stats.csv";
  core::write_file_atomic(
      path, kHeader + "\n" + train_stats_row(record_for(1)) + "\n2,0.5,zero,1,1,1,1,1,1,1\n");
  try {
    read_train_stats(path);
    FAIL() << "a bad value was accepted";
  } catch (const core::FileError& e) {
    EXPECT_TRUE(contains(e.what(), path.string())) << e.what();
    EXPECT_TRUE(contains(e.what(), "line 3")) << e.what();
    EXPECT_TRUE(contains(e.what(), "overall_loss")) << e.what();
  }
}

// --------------------------------------------------------------------------------- restart

std::string last_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of('\n');
  const std::size_t start = text.rfind('\n', end);
  return text.substr(start + 1, end - start);
}

TEST(Restart, ScriptTextIsExact) {
  RestartSpec spec;
  spec.run_dir = "/scratch/runs/benchmark_20240305-070809";
  spec.executable = "/opt/scaffold/bin/scaffold";
  spec.argv = {"benchmark", "-c", "cfg.yml", "--base-run-dir", "x", "--seed", "3"};
  spec.env = {{"PROFILE_TORCH", "1"}};
  const std::string expected =
      "#!/usr/bin/env bash\n"
      "# Resumes this scaffold run from its last checkpoint, reading the run's own config.yaml.\n"
      "# Extra arguments are passed on to scaffold, e.g. ./restart.sh --epochs 20\n"
      "set -euo pipefail\n"
      "RUN_DIR=/scratch/runs/benchmark_20240305-070809\n"
      "export PROFILE_TORCH=1\n"
      "exec /opt/scaffold/bin/scaffold benchmark -c \"$RUN_DIR/config.yaml\" --seed 3 --restart "
      "--run-dir \"$RUN_DIR\" \"$@\"\n";
  EXPECT_EQ(restart_script(spec), expected);
}

TEST(Restart, QuotesLikeShlex) {
  EXPECT_EQ(shell_quote("a/b-c_1.yml"), "a/b-c_1.yml");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("my run"), "'my run'");
  EXPECT_EQ(shell_quote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  RestartSpec spec;
  spec.run_dir = "/tmp/my run/it's";
  spec.executable = "/bin/scaffold";
  spec.argv = {"benchmark", "-c", "c.yml", "--fract-base-dir", "a b"};
  const std::string text = restart_script(spec);
  EXPECT_TRUE(contains(text, "\nRUN_DIR='/tmp/my run/it'\"'\"'s'\n")) << text;
  EXPECT_TRUE(contains(text, " --fract-base-dir 'a b' ")) << text;
}

TEST(Restart, ConfigRunDirAndJobFlagsAreRewritten) {
  RestartSpec spec;
  spec.run_dir = "/r";
  spec.executable = "/bin/scaffold";
  spec.argv = {"-v",
               "benchmark",
               "--config=a.yml",
               "-c",
               "b.yml",
               "-cc.yml",
               "--config",
               "d.yml",
               "--base-run-dir=/x",
               "--job-name",
               "j",
               "--restart",
               "--run-dir",
               "/old",
               "--run-dir=/o",
               "--job-name=k",
               "--base-run-dir",
               "/y",
               "--epochs",
               "5"};
  EXPECT_EQ(last_line(restart_script(spec)),
            "exec /bin/scaffold -v benchmark -c \"$RUN_DIR/config.yaml\" --epochs 5 --restart "
            "--run-dir \"$RUN_DIR\" \"$@\"");
}

TEST(Restart, LauncherPrefixForMoreThanOneRank) {
  RestartSpec spec;
  spec.run_dir = "/r";
  spec.executable = "/bin/scaffold";
  spec.argv = {"benchmark", "-c", "c.yml"};
  spec.world_size = 4;
  EXPECT_EQ(last_line(restart_script(spec)),
            "exec mpirun -n 4 /bin/scaffold benchmark -c \"$RUN_DIR/config.yaml\" --restart "
            "--run-dir \"$RUN_DIR\" \"$@\"");
  spec.launcher = "srun";
  EXPECT_TRUE(last_line(restart_script(spec)).rfind("exec srun -n 4 /bin/scaffold ", 0) == 0);
  spec.world_size = 1;
  EXPECT_TRUE(last_line(restart_script(spec)).rfind("exec /bin/scaffold ", 0) == 0);
}

TEST(Restart, BadEnvironmentNameIsAnError) {
  RestartSpec spec;
  spec.run_dir = "/r";
  spec.executable = "/bin/scaffold";
  spec.env = {{"A B", "1"}};
  EXPECT_THROW(restart_script(spec), core::Error);
}

// A stand-in for scaffold (or the launcher) that prints a tag, one env var and its argv.
void write_fake(const fs::path& path, const std::string& tag) {
  {
    std::ofstream out(path);
    out << "#!/bin/sh\necho " << tag << "\necho \"env=$SCAFFOLD_TEST_VAR\"\n"
        << "for a in \"$@\"; do printf '%s\\n' \"$a\"; done\n";
  }
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

std::string lines(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += w + "\n";
  return text;
}

TEST(Restart, GeneratedScriptDeliversTheRewrittenArgv) {
  test::TempDir tmp;
  const fs::path run_dir = tmp.path() / "run dir 'q' $x";
  fs::create_directories(run_dir);
  const fs::path exe = tmp.path() / "fake scaffold";
  const fs::path launcher = tmp.path() / "fake launcher";
  write_fake(exe, "SCAFFOLD");
  write_fake(launcher, "LAUNCHER");
  RestartSpec spec;
  spec.run_dir = run_dir;
  spec.executable = exe.string();
  spec.argv = {"benchmark", "-c", "/etc/cfg one.yml", "--base-run-dir", "/x", "--seed", "3"};
  spec.env = {{"SCAFFOLD_TEST_VAR", "a b'c"}};
  write_restart_script(spec);
  const fs::path script = run_dir / "restart.sh";
  struct stat st {};
  ASSERT_EQ(::stat(script.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);

  // Run through its shebang (needs the execute bit), with one extra flag for "$@".
  const auto single = test::run_command(shell_quote(script.string()) + " --epochs 'five 5'");
  EXPECT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(single.output, lines({"SCAFFOLD", "env=a b'c", "benchmark", "-c",
                                  (run_dir / "config.yaml").string(), "--seed", "3", "--restart",
                                  "--run-dir", run_dir.string(), "--epochs", "five 5"}));

  spec.world_size = 4;
  spec.launcher = launcher.string();
  write_restart_script(spec);
  const auto multi = test::run_command(shell_quote(script.string()));
  EXPECT_EQ(multi.exit_code, 0) << multi.output;
  EXPECT_EQ(multi.output, lines({"LAUNCHER", "env=a b'c", "-n", "4", exe.string(), "benchmark",
                                 "-c", (run_dir / "config.yaml").string(), "--seed", "3",
                                 "--restart", "--run-dir", run_dir.string()}));
}

// --------------------------------------------------------------------------------- figures

// Sets PATH for one test and puts it back.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() {
    if (old_) {
      ::setenv("PATH", old_->c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;

 private:
  std::optional<std::string> old_;
};

bool is_png(const fs::path& path) {
  const std::string bytes = core::read_file(path);
  return bytes.size() > 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

bool have_gnuplot() {
  return test::run_command("command -v gnuplot").exit_code == 0;
}

TEST(Figures, WritesThreePngs) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  test::TempDir tmp;
  std::vector<EpochRecord> records;
  for (int64_t e = 1; e <= 6; ++e) records.push_back(record_for(e));
  ASSERT_TRUE(write_figures(tmp.path(), records, "v=64, c=5, u=3"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(tmp.path() / "figures"))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"train_loss.png", "val_dice.png", "val_loss.png"}))
      << "temporary files left behind?";
  for (const std::string& name : names) EXPECT_TRUE(is_png(tmp.path() / "figures" / name)) << name;
}

TEST(Figures, AwkwardTitlesAndValuesStillPlot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  test::TempDir tmp;
  const fs::path run_dir = tmp.path() / "it's a \"run\"";
  std::vector<EpochRecord> records{record_for(1)};
  records[0].overall_loss = 0.0;  // no log axis possible
  records[0].val_loss_avg = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(write_figures(run_dir, records, "it's \"v\"=64_{x}\nc=5"));
  for (const char* name : {"train_loss.png", "val_dice.png", "val_loss.png"})
    EXPECT_TRUE(is_png(run_dir / "figures" / name)) << name;
}

TEST(Figures, NoGnuplotOnPathReturnsFalseAndWritesNothing) {
  test::TempDir tmp;
  const fs::path empty_bin = tmp.path() / "empty-bin";
  const fs::path run_dir = tmp.path() / "run";
  fs::create_directories(empty_bin);
  fs::create_directories(run_dir);
  {
    ScopedPath path(empty_bin.string());
    EXPECT_FALSE(write_figures(run_dir, {record_for(1), record_for(2)}, "t"));
  }
  EXPECT_TRUE(fs::is_empty(run_dir));
}

TEST(Figures, NoRecordsNoFigures) {
  test::TempDir tmp;
  EXPECT_FALSE(write_figures(tmp.path(), {}, "t"));
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

}  // namespace
}  // namespace scaffold::report
