#include "suite/run_folder.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <type_traits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/sysinfo.hpp"
#include "dist/process_grid.hpp"
#include "report/restart.hpp"
#include "report/run_dir.hpp"

namespace scaffold::suite {
namespace fs = std::filesystem;

std::vector<std::string> override_lines(const std::vector<config::FlagOverride>& flags) {
  std::vector<std::string> lines;
  for (const auto& f : flags) {
    const std::string value = std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, double>)
            return core::python_float_str(x);
          else if constexpr (std::is_same_v<T, std::string>)
            return report::shell_quote(x);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            return fmt::format("[{}]", fmt::join(x, ", "));
          // As typed (a value the loader accepted, e.g. 3.5 floored for problem_scale).
          else if constexpr (std::is_same_v<T, config::FlagText>)
            return x.list ? fmt::format("[{}]", fmt::join(x.items, ", "))
                          : (x.items.empty() ? "" : x.items.front());
          else
            return fmt::format("{}", x);
        },
        f.value);
    lines.push_back(f.key + ": " + value);
  }
  return lines;
}

const std::vector<std::string>& restart_changeable_keys() {
  static const std::vector<std::string> keys = {
      "epochs",
      "target_dice",
      "time_budget_s",  // when to stop
      "train_iters",
      "exit_duration_in_mins",  // (the LLM's; its LR schedule is by samples)
      "checkpoint_interval",
      "async_save",  // how often to save
      "progress_timeout_s",
      "dataloader_num_workers",
      "device",  // how to run
      "loss_freq",
      "base_run_dir",
      "job_name",  // unused or ignored on restart
      "train_from_scratch",
      "datagen_from_scratch",
      "dataset_reuse_enforce_commit_id"};
  return keys;
}

namespace {

// "key: value" lines of to_yaml's text (comments skipped), by key.
std::map<std::string, std::string> yaml_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t colon = line.find(": ");
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    out[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return out;
}

// The run folder's lock, held by this process until it ends (the kernel releases an flock when
// its last descriptor closes, which is when the process exits, however it exits).
std::mutex g_held_mutex;
std::map<std::string, core::FileLock> g_held;  // run folder -> its lock

void lock_run_folder(const fs::path& dir) {
  const std::lock_guard<std::mutex> guard(g_held_mutex);
  if (g_held.count(dir.string()) > 0) return;
  std::optional<core::FileLock> lock = core::FileLock::try_take(dir / ".lock");
  if (!lock) {
    const std::string holder = core::FileLock::holder_note(dir / ".lock");
    throw core::FileError(dir.string(),
                          "the run folder is in use by another scaffold process" +
                              (holder.empty() ? std::string() : " (pid@host " + holder + ")") +
                              "; wait for it to end: two processes writing one run folder would "
                              "interleave its checkpoints and train_stats.csv");
  }
  g_held.emplace(dir.string(), std::move(*lock));
}

// Undoes a new run folder whose set-up failed (a full disk at its first write, say): removes the
// files this process wrote there and the folder itself, which then holds nothing of value. Only
// those names: anything else that appeared in it keeps the folder (rmdir fails, and that is all).
void remove_new_run_folder(const fs::path& dir) {
  {
    const std::lock_guard<std::mutex> guard(g_held_mutex);
    g_held.erase(dir.string());
  }
  std::error_code ec;
  for (const char* name : {"base_config.yaml", "config.yaml", "overrides.yaml",
                           report::kRestartScriptName, "system.json", ".lock"})
    fs::remove(dir / name, ec);
  if (fs::remove(dir, ec))
    LOG_INFO("removed the run folder {}, which this run had created and could not set up",
             dir.string());
}

}  // namespace

std::vector<std::string> restart_config_changes(const std::string& run_yaml,
                                                const std::string& command_yaml) {
  const std::map<std::string, std::string> run = yaml_lines(run_yaml);
  const std::map<std::string, std::string> command = yaml_lines(command_yaml);
  const std::vector<std::string>& free = restart_changeable_keys();
  std::vector<std::string> changes;
  for (const auto& [key, value] : command) {
    const auto it = run.find(key);
    if (it == run.end() || it->second == value) continue;
    if (std::find(free.begin(), free.end(), key) != free.end()) continue;
    changes.push_back(fmt::format("{} is {} in the run's config.yaml but {} in this command", key,
                                  it->second, value));
  }
  return changes;
}

namespace {

// The subcommand named in config::to_yaml's header ("# Reload it with `scaffold fno -c ..."), or
// "" for a file without that header.
std::string written_by(const std::string& yaml) {
  const std::string mark = "`scaffold ";
  const std::size_t at = yaml.find(mark);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + mark.size();
  const std::size_t end = yaml.find_first_of(" `\n", begin);
  return yaml.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

fs::path prepare_run_folder(dist::Communicator& comm, const RunFolderRequest& request) {
  std::string path;
  fs::path created;  // the folder this call made, if it made one
  // Rank 0: the folder and its files.
  const auto set_up = [&] {
    fs::path dir;
    if (!request.resume_dir.empty()) {
      dir = fs::absolute(request.resume_dir).lexically_normal();
      const fs::path ckpt = dir / request.checkpoint_dir;
      std::error_code ec;
      if (!fs::is_directory(dir, ec))
        throw core::FileError(dir.string(),
                              fs::exists(dir, ec)
                                  ? "cannot restart: not a folder (--run-dir names a run folder)"
                                  : "cannot restart: no such run folder");
      // A sharded optimizer's run has one file per rank (train/loop.hpp): rank 0's stands for them.
      bool any = false;
      for (const char* name :
           {"checkpoint_last", "checkpoint_best", "checkpoint_last.rank0", "checkpoint_best.rank0"})
        any = any || fs::exists(ckpt / name, ec);
      if (!any)
        throw core::FileError(dir.string(),
                              "cannot restart: no " + (ckpt / "checkpoint_last").string() +
                                  " or checkpoint_best (was checkpoint_interval > 0?)");
      lock_run_folder(dir);
      // Before any file is written: a refused restart leaves the run as it was.
      if (!fs::exists(dir / "config.yaml", ec))
        throw core::FileError(dir.string(), "cannot restart: the run folder has no config.yaml");
      const std::string run_yaml = core::read_file(dir / "config.yaml");
      // Another workload's folder: its keys would be listed as "changes", which hides the mistake.
      const std::string run_command = written_by(run_yaml),
                        this_command = written_by(request.config_yaml);
      if (!run_command.empty() && !this_command.empty() && run_command != this_command)
        throw core::FileError(
            dir.string(),
            fmt::format("cannot restart: this run folder was written by `scaffold {}`, "
                        "not `scaffold {}`; resume it with its own restart.sh",
                        run_command, this_command));
      const std::vector<std::string> changes =
          restart_config_changes(run_yaml, request.config_yaml);
      if (!changes.empty()) {
        std::string message =
            "cannot restart: a restart continues the same run, so the keys that set its data, "
            "model and training recipe cannot change:";
        for (const std::string& change : changes) message += "\n  " + change;
        message +=
            "\nDrop those flags (the run's restart.sh passes none), or start a new run for other "
            "values.";
        throw core::FileError(dir.string(), message);
      }
    } else {
      dir = report::create_run_dir(request.base_run_dir, request.job_name,
                                   std::chrono::system_clock::now());
      created = dir;
      lock_run_folder(dir);
      core::write_file_atomic(dir / "base_config.yaml", core::read_file(request.base_config_file));
    }
    core::write_file_atomic(dir / "config.yaml", request.config_yaml);
    if (request.resume_dir.empty()) {
      std::string overrides = "# command-line flags of this run\n";
      for (const auto& line : request.flag_lines) overrides += line + "\n";
      core::write_file_atomic(dir / "overrides.yaml", overrides);
    } else {
      // The original flags stay; each restart adds its own as comments, so the file still loads
      // as the first run's overrides.
      std::error_code ec;
      std::string overrides =
          fs::exists(dir / "overrides.yaml", ec) ? core::read_file(dir / "overrides.yaml") : "";
      overrides += "# restart " + report::utc_now_iso8601() + ":";
      for (const auto& line : request.flag_lines) overrides += " " + line + ";";
      overrides += "\n";
      core::write_file_atomic(dir / "overrides.yaml", overrides);
    }
    report::RestartSpec spec;
    spec.run_dir = dir;
    spec.executable = core::executable_path();
    spec.argv = request.argv;
    spec.working_dir = fs::current_path();  // relative flags in argv resolve as they did
    spec.world_size = comm.size();
    spec.launcher = std::getenv("SLURM_JOB_ID") ? "srun" : "mpirun";
    for (const char* var : {"PROFILE_TORCH", "PROFILE_TORCH_WAIT", "PROFILE_TORCH_WARMUP",
                            "PROFILE_TORCH_ACTIVE", "OMP_NUM_THREADS"})
      if (const char* value = std::getenv(var)) spec.env.emplace_back(var, value);
    report::write_restart_script(spec);
    path = dir.string();
  };
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    try {
      set_up();
    } catch (...) {
      if (!created.empty()) remove_new_run_folder(created);
      throw;
    }
  });
  comm.broadcast(path, 0);
  return path;
}

SetupGuard::SetupGuard(dist::Communicator& comm, fs::path run_dir, bool resumed)
    : comm_(comm),
      run_dir_(std::move(run_dir)),
      armed_(!resumed),
      exceptions_(std::uncaught_exceptions()) {}

SetupGuard::~SetupGuard() {
  // Only while an exception leaves the set-up: a normal return keeps the folder.
  if (!armed_ || std::uncaught_exceptions() <= exceptions_ || comm_.rank() != 0) return;
  try {
    remove_new_run_folder(run_dir_);
  } catch (...) {  // never from a destructor during unwinding
  }
}

report::SystemInfo write_run_context(dist::Communicator& comm, const fs::path& run_dir,
                                     report::SystemInfo info) {
  if (comm.rank() != 0) return info;
  // Filled in place: a copy field by field had left cpu_isa out of every system.json.
  report::add_host_info(info);
  info.mpi_version = dist::mpi_library_version();
  info.world_size = comm.size();
  info.nodes = comm.nodes();
  report::write_system_json(run_dir, info);
  return info;
}

}  // namespace scaffold::suite
