// Helpers for the end-to-end tests, which drive the real `scaffold` binary as users do.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
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

// Runs scaffold with `args`, polls `ready` every 5 ms (at most `max_wait`), then kills it with
// SIGKILL. Returns the wait status.
inline int run_and_kill(const std::vector<std::string>& args, const std::function<bool()>& ready,
                        std::chrono::milliseconds max_wait = std::chrono::seconds(5)) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(kBinary.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kBinary.c_str(), argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (std::chrono::steady_clock::now() < deadline && !ready())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace scaffold::test
