// restart.sh (docs/benchmark.md): a bash script in the run folder that resumes the run from its
// last checkpoint with the original command line, rewritten to read the run's own config.yaml and
// to resume in that folder. Unlike ScaFFold's it activates no venv (scaffold is one binary) and
// launches with mpirun/srun rather than torchrun-hpc.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scaffold::report {

inline constexpr const char* kRestartScriptName = "restart.sh";

struct RestartSpec {
  std::filesystem::path run_dir;  // made absolute in the script
  std::string executable;         // absolute path of scaffold
  // The original arguments after the executable, e.g.
  // {"benchmark", "-c", "cfg.yml", "--base-run-dir", "x", "--seed", "3"}.
  std::vector<std::string> argv;
  int world_size = 1;               // > 1: the command is prefixed by `<launcher> -n <world_size>`
  std::string launcher = "mpirun";  // or "srun"
  std::vector<std::pair<std::string, std::string>> env;  // exported first, e.g. PROFILE_TORCH
  // The run's working directory: the script changes to it first, so relative paths in argv
  // resolve as they did for the run, wherever the script is started from. Empty: no cd.
  std::filesystem::path working_dir;
};

// Quotes one word for bash the way Python's shlex.quote does: words of only [A-Za-z0-9_@%+=:,./-]
// stay bare, anything else goes in single quotes with each ' written as '"'"'.
std::string shell_quote(std::string_view word);

// The script text. The resumed run's arguments are spec.argv with every config flag (-c X, -cX,
// --config X, --config=X) replaced by one `-c "$RUN_DIR/config.yaml"` at the first one's place;
// --base-run-dir, --job-name, --restart and --run-dir (with their values) dropped; then
// `--restart --run-dir "$RUN_DIR"` and the script's own arguments ("$@"). Throws core::Error for an
// environment variable name that is not a shell identifier.
std::string restart_script(const RestartSpec& spec);

// Writes restart_script(spec) to <run_dir>/restart.sh atomically, already mode 0755 when it
// appears; throws core::FileError naming the file on failure.
void write_restart_script(const RestartSpec& spec);

}  // namespace scaffold::report
