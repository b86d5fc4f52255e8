// Restarts that cannot go wrong (issue 16, item 8): a restart that changes a key of the run's
// data, model or recipe is refused before any file of the run folder changes, naming the key and
// both values; overrides.yaml keeps the original flags; restart.sh returns to the run's working
// directory; and the run folder is locked, so a second process on it is refused. A new run whose
// set-up fails to write (item 11) leaves no folder and no temporary behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/load.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "dist/communicator.hpp"
#include "fs_test_util.hpp"
#include "suite/run_folder.hpp"
#include "test_util.hpp"
#include "workloads/fno/options.hpp"
#include "workloads/scaffold/options.hpp"
#include "workloads/scaffold/schema.hpp"

namespace scaffold::suite {
namespace {

namespace fs = std::filesystem;

dist::Communicator& world() {
  static std::unique_ptr<dist::Runtime> runtime = std::make_unique<dist::Runtime>(nullptr, nullptr);
  return runtime->world();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RestartConfigChanges, NamesEachChangedKeyWithBothValues) {
  const std::string run = "# comment\nseed: 42\nproblem_scale: 7\nepochs: -1\noptimizer: ADAM\n";
  const std::string command =
      "# other comment\nseed: 43\nproblem_scale: 7\nepochs: 20\noptimizer: SGD\n";
  const std::vector<std::string> changes = restart_config_changes(run, command);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], "optimizer is ADAM in the run's config.yaml but SGD in this command");
  EXPECT_EQ(changes[1], "seed is 42 in the run's config.yaml but 43 in this command");
  // epochs may change (the documented ./restart.sh --epochs 20); a key only one side has is not
  // compared (another scaffold version's config).
  EXPECT_TRUE(restart_config_changes(run, "epochs: 30\nnew_key: 1\n").empty());
}

class RunFolderTest : public ::testing::Test {
 protected:
  RunFolderRequest request_for(const config::Config& cfg, const std::string& resume_dir) const {
    return run_folder_request(cfg, {base_config_}, {}, resume_dir, {"benchmark", "-c", "cfg.yml"});
  }
  // A new run, with a checkpoint file so that it can be restarted.
  fs::path new_run() {
    cfg_.base_run_dir = (tmp_.path() / "runs").string();
    core::write_file_atomic(base_config_, std::string("seed: 42\n"));
    const fs::path dir = prepare_run_folder(world(), request_for(cfg_, ""));
    core::create_directories(dir / cfg_.checkpoint_dir);
    core::write_file_atomic(dir / cfg_.checkpoint_dir / "checkpoint_last", std::string("ckpt"));
    return dir;
  }
  static std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  }

  test::TempDir tmp_;
  config::Config cfg_;
  fs::path base_config_ = tmp_.path() / "cfg.yml";
};

TEST_F(RunFolderTest, RestartChangingTheDataIsRefusedBeforeAnythingIsWritten) {
  const fs::path dir = new_run();
  const std::string config_before = core::read_file(dir / "config.yaml");
  const std::string overrides_before = core::read_file(dir / "overrides.yaml");
  const std::string restart_before = core::read_file(dir / "restart.sh");
  config::Config changed = cfg_;
  changed.problem_scale = 6;
  changed.unet_base_channels = 32;
  const std::string message =
      error_of([&] { prepare_run_folder(world(), request_for(changed, dir.string())); });
  EXPECT_TRUE(
      contains(message, "problem_scale is 7 in the run's config.yaml but 6 in this command"))
      << message;
  EXPECT_TRUE(contains(message, "unet_base_channels is 64 in the run's config.yaml but 32"))
      << message;
  EXPECT_EQ(core::read_file(dir / "config.yaml"), config_before);
  EXPECT_EQ(core::read_file(dir / "overrides.yaml"), overrides_before);
  EXPECT_EQ(core::read_file(dir / "restart.sh"), restart_before);
}

// --run-dir of another workload's folder names both workloads, instead of listing the other
// workload's keys as changes.
TEST_F(RunFolderTest, RestartInAnotherWorkloadsFolderNamesBothWorkloads) {
  const fs::path dir = new_run();
  const std::string config_before = core::read_file(dir / "config.yaml");
  config::FnoConfig fno;
  fno.base_run_dir = cfg_.base_run_dir;
  const RunFolderRequest other = run_folder_request(fno, {base_config_}, {}, dir.string(), {"fno"});
  const std::string message = error_of([&] { prepare_run_folder(world(), other); });
  EXPECT_TRUE(contains(message, "written by `scaffold benchmark`, not `scaffold fno`")) << message;
  EXPECT_EQ(core::read_file(dir / "config.yaml"), config_before);
}

TEST_F(RunFolderTest, RestartKeepsTheOriginalFlagsAndMayChangeEpochs) {
  cfg_.base_run_dir = (tmp_.path() / "runs").string();
  core::write_file_atomic(base_config_, std::string("seed: 42\n"));
  RunFolderRequest first = request_for(cfg_, "");
  first.flag_lines = {"seed: 42", "problem_scale: 7"};
  const fs::path dir = prepare_run_folder(world(), first);
  core::create_directories(dir / cfg_.checkpoint_dir);
  core::write_file_atomic(dir / cfg_.checkpoint_dir / "checkpoint_last", std::string("ckpt"));
  const std::string overrides_before = core::read_file(dir / "overrides.yaml");
  EXPECT_EQ(overrides_before, "# command-line flags of this run\nseed: 42\nproblem_scale: 7\n");

  config::Config longer = cfg_;
  longer.epochs = 20;
  RunFolderRequest restart = request_for(longer, dir.string());
  restart.flag_lines = {"epochs: 20"};
  EXPECT_EQ(prepare_run_folder(world(), restart), dir);
  const std::string overrides = core::read_file(dir / "overrides.yaml");
  EXPECT_EQ(overrides.rfind(overrides_before, 0), 0u) << overrides;
  EXPECT_TRUE(contains(overrides, " epochs: 20;\n")) << overrides;
  EXPECT_EQ(config::config_from_yaml_text(overrides, "overrides.yaml").problem_scale, 7);
  EXPECT_EQ(
      config::config_from_yaml_text(core::read_file(dir / "config.yaml"), "config.yaml").epochs,
      20);
}

TEST_F(RunFolderTest, RestartScriptReturnsToTheRunsWorkingDirectory) {
  const fs::path dir = new_run();
  const std::string script = core::read_file(dir / "restart.sh");
  const std::string cd = "\ncd " + fs::current_path().string() + "\n";
  EXPECT_TRUE(contains(script, cd)) << script;
  EXPECT_LT(script.find(cd), script.find("\nexec ")) << script;
}

// Another process holding the folder's lock (as a second restart.sh would) makes a
// restart fail naming the folder; when it lets go, the restart goes ahead.
TEST_F(RunFolderTest, ASecondProcessOnTheRunFolderIsRefused) {
  const fs::path dir = new_run();
  const fs::path lock = dir / ".lock";
  ASSERT_TRUE(fs::exists(lock));
  // This process holds the lock of `dir`; the child locks a copy of the run that no one holds.
  const fs::path other = tmp_.path() / "copy";
  fs::copy(dir, other, fs::copy_options::recursive);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only system calls between fork and _exit: the child holds the lock until it is killed.
    const int fd = ::open((other / ".lock").c_str(), O_RDWR);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    for (;;) ::pause();
  }
  bool child_holds = false;
  for (int i = 0; i < 200 && !child_holds; ++i) {  // until the child holds it
    const int fd = ::open((other / ".lock").c_str(), O_RDWR);
    child_holds = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    if (fd >= 0) ::close(fd);
    if (!child_holds) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(child_holds);
  const std::string message =
      error_of([&] { prepare_run_folder(world(), request_for(cfg_, other.string())); });
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(
      contains(message, other.string() + ": the run folder is in use by another scaffold process"))
      << message;
  // The holder is gone (flock's lock went with it): the restart proceeds.
  EXPECT_EQ(prepare_run_folder(world(), request_for(cfg_, other.string())), other);
}

// A new run whose first write fails (a file-size limit standing in for a full disk; issue 16,
// item 11): the error names the file and the reason, and the run folder this call created is
// gone again, with no temporary left anywhere below the base folder.
TEST_F(RunFolderTest, ANewRunWhoseFirstWriteFailsLeavesNoFolder) {
  cfg_.base_run_dir = (tmp_.path() / "runs").string();
  core::write_file_atomic(base_config_, std::string(8192, '#') + "\nseed: 42\n");
  std::string message;
  {
    test::FileSizeLimit limit(4096);
    message = error_of([&] { prepare_run_folder(world(), request_for(cfg_, "")); });
  }
  EXPECT_TRUE(contains(message, "/base_config.yaml: write failed: File too large")) << message;
  EXPECT_TRUE(contains(message, cfg_.base_run_dir)) << message;
  ASSERT_TRUE(fs::is_directory(cfg_.base_run_dir));
  EXPECT_TRUE(fs::is_empty(cfg_.base_run_dir)) << "the new run folder was left behind";
  EXPECT_TRUE(test::temporaries_below(tmp_.path()).empty());

  // A later file failing (base_config.yaml fits, config.yaml, the whole merged config, does not):
  // the folder goes as well.
  core::write_file_atomic(base_config_, std::string("seed: 42\n"));
  {
    test::FileSizeLimit limit(300);
    message = error_of([&] { prepare_run_folder(world(), request_for(cfg_, "")); });
  }
  EXPECT_TRUE(contains(message, "/config.yaml: write failed: File too large")) << message;
  EXPECT_TRUE(fs::is_empty(cfg_.base_run_dir)) << "the new run folder was left behind";
  EXPECT_TRUE(test::temporaries_below(tmp_.path()).empty());
  // With room, the same request makes its folder.
  EXPECT_TRUE(fs::is_directory(prepare_run_folder(world(), request_for(cfg_, ""))));
}

// A restart that fails to write leaves the run folder (it holds the run) as it was.
TEST_F(RunFolderTest, AFailedRestartKeepsTheRunFolder) {
  const fs::path dir = new_run();
  const std::string config_before = core::read_file(dir / "config.yaml");
  std::string message;
  {
    test::FileSizeLimit limit(16);
    message = error_of([&] { prepare_run_folder(world(), request_for(cfg_, dir.string())); });
  }
  EXPECT_TRUE(contains(message, "File too large")) << message;
  EXPECT_EQ(core::read_file(dir / "config.yaml"), config_before);
  EXPECT_TRUE(fs::exists(dir / cfg_.checkpoint_dir / "checkpoint_last"));
  EXPECT_TRUE(test::temporaries_below(tmp_.path()).empty());
}

}  // namespace
}  // namespace scaffold::suite
