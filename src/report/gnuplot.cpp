#include "report/gnuplot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/fs.hpp"

extern char** environ;

namespace scaffold::report {
namespace fs = std::filesystem;

// The first executable `name` in PATH, like the shell's lookup (an unset PATH means /usr/bin:/bin).
std::optional<fs::path> find_on_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  const std::string path = env ? env : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

// A gnuplot single-quoted string: no escapes are interpreted inside, and '' is one quote.
// Control characters (a newline in a title) would end the command, so they become spaces.
std::string gnuplot_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "''";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `gnuplot script` with stdout and stderr in `log`; returns the exit status, or throws.
int run_gnuplot(const fs::path& gnuplot, const fs::path& script, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string arg0 = gnuplot.string();
  std::string arg1 = script.string();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw core::FileError(gnuplot.string(), std::string("cannot start: ") + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw core::FileError(gnuplot.string(), "waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string log_tail(const fs::path& log) {
  std::string text;
  try {
    text = core::read_file(log);
  } catch (const core::Error&) {
    return "";
  }
  constexpr std::size_t kTail = 600;
  if (text.size() > kTail) text = "..." + text.substr(text.size() - kTail);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace scaffold::report
