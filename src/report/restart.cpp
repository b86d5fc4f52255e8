#include "report/restart.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

// A word of the command line: `raw` ones are written as they are ("$RUN_DIR"-relative paths, so
// the script still works after moving the folder and editing RUN_DIR), the rest are quoted.
struct Word {
  std::string text;
  bool raw = false;
};

bool is_shell_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && std::strchr("_@%+=:,./-", c) != nullptr);
}

bool is_identifier(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// How many words an argument removes: 0 keeps it, 1 drops it, 2 drops it and its value.
int dropped_words(const std::string& arg, bool* is_config) {
  *is_config = false;
  if (arg == "-c" || arg == "--config") {
    *is_config = true;
    return 2;
  }
  if (starts_with(arg, "--config=") || (starts_with(arg, "-c") && arg.size() > 2)) {
    *is_config = true;
    return 1;
  }
  for (const char* flag : {"--base-run-dir", "--job-name", "--run-dir"}) {
    if (arg == flag) return 2;
    if (starts_with(arg, std::string(flag) + "=")) return 1;
  }
  return arg == "--restart" ? 1 : 0;
}

std::vector<Word> restart_words(const std::vector<std::string>& argv) {
  const Word config_flag{"-c"};
  const Word config_path{"\"$RUN_DIR/config.yaml\"", true};
  std::vector<Word> out;
  bool config_placed = false;
  for (std::size_t i = 0; i < argv.size();) {
    bool is_config = false;
    const int drop = dropped_words(argv[i], &is_config);
    if (is_config && !config_placed) {
      out.push_back(config_flag);
      out.push_back(config_path);
      config_placed = true;
    }
    if (drop == 0) out.push_back(Word{argv[i]});
    i += drop == 0 ? 1 : static_cast<std::size_t>(drop);
  }
  if (!config_placed) {  // scaffold would have refused this run, but the script stays valid
    out.push_back(config_flag);
    out.push_back(config_path);
  }
  out.push_back(Word{"--restart"});
  out.push_back(Word{"--run-dir"});
  out.push_back(Word{"\"$RUN_DIR\"", true});
  out.push_back(Word{"\"$@\"", true});
  return out;
}

}  // namespace

std::string shell_quote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) safe = safe && is_shell_safe(c);
  if (safe) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\"'\"'";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string restart_script(const RestartSpec& spec) {
  std::string text =
      "#!/usr/bin/env bash\n"
      "# Resumes this scaffold run from its last checkpoint, reading the run's own config.yaml.\n"
      "# Extra arguments are passed on to scaffold, e.g. ./restart.sh --epochs 20\n"
      "set -euo pipefail\n";
  text += "RUN_DIR=" + shell_quote(fs::absolute(spec.run_dir).string()) + "\n";
  for (const auto& [name, value] : spec.env) {
    if (!is_identifier(name))
      throw core::Error("restart.sh: environment variable name '" + name +
                        "' is not a shell identifier");
    text += "export " + name + "=" + shell_quote(value) + "\n";
  }
  if (!spec.working_dir.empty())
    text += "cd " + shell_quote(fs::absolute(spec.working_dir).string()) + "\n";
  // exec: the launcher replaces bash, so signals from a scheduler reach it directly.
  text += "exec";
  if (spec.world_size > 1)
    text += " " + shell_quote(spec.launcher) + " -n " + std::to_string(spec.world_size);
  text += " " + shell_quote(spec.executable);
  for (const Word& word : restart_words(spec.argv))
    text += " " + (word.raw ? word.text : shell_quote(word.text));
  return text + "\n";
}

void write_restart_script(const RestartSpec& spec) {
  const fs::path path = spec.run_dir / kRestartScriptName;
  const std::string text = restart_script(spec);
  // Not core::write_file_atomic: the mode must be set before the rename, so restart.sh never
  // appears without its execute bit.
  const core::TemporaryFile temporary = core::create_temporary(path, 0755);
  const fs::path& tmp = temporary.path;
  const int fd = temporary.fd;
  std::size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  // fchmod: open's mode is filtered by the umask.
  ok = ok && ::fchmod(fd, 0755) == 0 && ::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw core::FileError(path.string(), std::string("cannot write: ") + std::strerror(error));
  }
}

}  // namespace scaffold::report
