// Test helpers for file-system failures and owners: a file-size limit that makes writes fail as
// a full disk would, a process holding a file's flock (a live writer or lock holder), the pid of
// a process that has ended, and the temporaries left below a folder.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/fs.hpp"

namespace scaffold::test {

// While alive, files this process writes may not grow past `bytes` (RLIMIT_FSIZE, the soft limit
// only, so it can be raised back) and SIGXFSZ is ignored: a write past the limit fails with EFBIG
// ("File too large"), as a full disk fails with ENOSPC, without root or a small file system.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_)(int) = SIG_DFL;
};

// Every path below `root` whose name holds ".tmp" (a temporary file or dataset folder).
inline std::vector<std::filesystem::path> temporaries_below(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().find(".tmp") != std::string::npos)
      found.push_back(it->path());
  return found;
}

// A process that holds an exclusive flock on `file` until it is killed (a live writer or lock
// holder of another process), and its pid. The constructor returns once the lock is held.
class LockHolder {
 public:
  explicit LockHolder(const std::filesystem::path& file) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {  // only system calls until _exit: the child holds the lock until killed
      ::close(ready[0]);
      const int fd = ::open(file.c_str(), O_RDWR | O_CREAT, 0644);
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
      const char ok = 1;
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ok = 0;
    held_ = pid_ > 0 && ::read(ready[0], &ok, 1) == 1;
    ::close(ready[0]);
  }
  ~LockHolder() { stop(); }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;
  bool held() const { return held_; }
  pid_t pid() const { return pid_; }
  // Kills the holder (its lock goes with it) and reaps it.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    held_ = false;
  }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

// Polls every `interval` (at most `max_polls` times) until each of `logs` exists and contains
// `needle`; returns whether they all did.
inline bool every_log_says(const std::filesystem::path (&logs)[2], const std::string& needle,
                           int max_polls = 1200,
                           std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
  const auto all = [&] {
    for (const std::filesystem::path& log : logs) {
      std::error_code ec;
      if (!std::filesystem::exists(log, ec) ||
          core::read_file(log).find(needle) == std::string::npos)
        return false;
    }
    return true;
  };
  for (int i = 0; i < max_polls && !all(); ++i) std::this_thread::sleep_for(interval);
  return all();
}

// The pid of a process that has ended (and been reaped): an owner that is provably gone.
inline pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace scaffold::test
