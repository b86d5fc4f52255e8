// Helpers for the end-to-end tests, which drive the real `scaffold` binary as users do.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.hpp"

namespace scaffold::test {

inline const std::string kBinary = SCAFFOLD_BINARY;

// The launcher prefix for `ranks` MPI ranks (as root, more ranks than cores allowed).
inline std::string mpiexec(int ranks) {
  return std::string(SCAFFOLD_MPIEXEC) + " -n " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root ";
}

// Every regular file below `root` (relative path -> contents), except files named `skip`.
inline std::map<std::string, std::string> snapshot(const std::filesystem::path& root,
                                                   const std::string& skip = "") {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().filename() != skip)
      files[std::filesystem::relative(e.path(), root).string()] = core::read_file(e.path());
  return files;
}

// Starts `binary` with `args` as a child process (no shell). Returns its pid, or -1.
inline pid_t spawn_binary(const std::string& binary, const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  ::_exit(127);
}

// Starts scaffold with `args` as a child process (no shell). Returns its pid, or -1.
inline pid_t spawn_scaffold(const std::vector<std::string>& args) {
  return spawn_binary(kBinary, args);
}

// Runs scaffold with `args`, polls `ready` every 5 ms (at most `max_wait`), then kills it with
// SIGKILL. Returns the wait status.
inline int run_and_kill(const std::vector<std::string>& args, const std::function<bool()>& ready,
                        std::chrono::milliseconds max_wait = std::chrono::seconds(5)) {
  const pid_t pid = spawn_scaffold(args);
  if (pid < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (std::chrono::steady_clock::now() < deadline && !ready())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// The tiny benchmark config of the benchmark tests, written to dir/tiny.yml: 16^3 volumes (16 of
// them: 12 training, 4 validation), a 2-layer U-Net of base 8, 2 classes + background; seconds
// per epoch. Outputs go below `dir` (runs/, lib/, data/). `extra` is appended.
inline std::filesystem::path write_tiny_benchmark_config(const std::filesystem::path& dir,
                                                         const std::string& extra = "") {
  const std::filesystem::path cfg = dir / "tiny.yml";
  std::ofstream(cfg) << "problem_scale: 4\nunet_bottleneck_dim: 2\nunet_base_channels: 8\n"
                     << "group_norm_groups: 4\nn_categories: 2\nn_instances_used_per_fractal: 24\n"
                     << "local_batch_size: 2\nwarmup_batches: 2\nseed: 3\n"
                     << "starting_learning_rate: 0.01\nmin_learning_rate: 0.001\n"
                     << "base_run_dir: " << (dir / "runs").string() << "\n"
                     << "fract_base_dir: " << (dir / "lib").string() << "\n"
                     << "dataset_dir: " << (dir / "data").string() << "\n"
                     << extra;
  return cfg;
}

// The one run folder below dir/runs (a test failure when there are none or several).
inline std::filesystem::path only_run_dir(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> runs;
  for (const auto& e : std::filesystem::directory_iterator(dir / "runs")) runs.push_back(e.path());
  EXPECT_EQ(runs.size(), 1u) << "one run folder below " << (dir / "runs");
  return runs.empty() ? std::filesystem::path() : runs.front();
}

// A CSV file's rows, each split at commas (no quoting: scaffold's CSVs have none).
inline std::vector<std::vector<std::string>> csv_rows(const std::filesystem::path& file) {
  std::istringstream in(core::read_file(file));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream cell_in(line);
    for (std::string cell; std::getline(cell_in, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// The run folder below dir/runs whose `csv` has at least `lines` lines (header included), polled
// every 20 ms for at most `limit`; empty when none got there in time. For tests that signal a
// running workload once it has made progress.
inline std::filesystem::path wait_for_csv_lines(
    const std::filesystem::path& dir, const std::string& csv, std::size_t lines,
    std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (std::filesystem::exists(dir / "runs", ec)) {
      std::filesystem::path run;
      for (const auto& e : std::filesystem::directory_iterator(dir / "runs", ec)) run = e.path();
      if (!run.empty() && std::filesystem::exists(run / csv, ec) &&
          csv_rows(run / csv).size() >= lines)
        return run;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

// Sends `signal` to the child `pid` and returns its wait status.
inline int signal_and_wait(pid_t pid, int signal) {
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace scaffold::test
