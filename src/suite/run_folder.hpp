// The run folder every workload writes (docs/architecture.md, 'Conventions'): created
// atomically under <base_run_dir>/<job_name>_<date>-<time>/ by rank 0, with base_config.yaml (the
// first -c file as given), config.yaml (the merged config, reloadable), overrides.yaml (the
// explicit flags), restart.sh (resumes the run) and system.json (host, devices, versions, grid).
// A restart reuses the folder named by --run-dir after checking it holds a checkpoint.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "dist/communicator.hpp"
#include "report/system_info.hpp"

namespace scaffold::suite {

struct RunFolderRequest {
  std::string base_run_dir;             // parent of the run folders (config key base_run_dir)
  std::string job_name;                 // folder name prefix (config key job_name)
  std::string checkpoint_dir;           // subfolder holding checkpoint_last / checkpoint_best
  std::string config_yaml;              // the merged, validated config as YAML
  std::string base_config_file;         // the first -c file, copied as base_config.yaml
  std::vector<std::string> flag_lines;  // "key: value" for each explicit flag, for overrides.yaml
  std::string resume_dir;               // non-empty: restart in this folder (--run-dir)
  std::vector<std::string> argv;        // the command line after the executable, for restart.sh
};

// "key: value" lines (YAML) for overrides.yaml, one per explicit flag.
std::vector<std::string> override_lines(const std::vector<config::FlagOverride>& flags);

// The request for a run of any workload's option struct C (each has base_run_dir, job_name and
// checkpoint_dir): `config_files` as given with -c, `flags` the explicit flags, `resume_dir` the
// --run-dir of a restart ("" for a new run), `argv` the command line after the executable.
template <class C>
RunFolderRequest run_folder_request(const C& cfg, const std::vector<std::string>& config_files,
                                    const std::vector<config::FlagOverride>& flags,
                                    const std::string& resume_dir,
                                    const std::vector<std::string>& argv) {
  RunFolderRequest r;
  r.base_run_dir = cfg.base_run_dir;
  r.job_name = cfg.job_name;
  r.checkpoint_dir = cfg.checkpoint_dir;
  r.config_yaml = config::to_yaml(cfg);
  r.base_config_file = config_files.front();
  r.flag_lines = override_lines(flags);
  r.resume_dir = resume_dir;
  r.argv = argv;
  return r;
}

// The keys a restart may give other values than the run's config.yaml holds: when to stop, how
// often to checkpoint, where and how fast to run. Every other key sets the run's data, model or
// training recipe, and a restart that changed one would continue the same run on other terms.
const std::vector<std::string>& restart_changeable_keys();

// One line per key whose value differs between the run's config.yaml text (`run_yaml`) and this
// command's merged config (`command_yaml`), both as config::to_yaml writes them, for every key
// not in restart_changeable_keys(); empty when the restart may go ahead. A key only one of them
// has (written by another scaffold version) is not compared.
std::vector<std::string> restart_config_changes(const std::string& run_yaml,
                                                const std::string& command_yaml);

// Collective: rank 0 creates (or, for a restart, checks) the folder and writes its files; every
// rank returns its absolute path. Errors are agreed (every rank throws dist::AgreedError).
// Rank 0 holds an exclusive flock on <folder>/.lock until the process ends, so a second process
// (two restart.sh at once, or a restart while the run still runs) is refused, naming the holder.
// A restart is refused, before any file is written, when a key outside restart_changeable_keys()
// differs from the run's config.yaml; it keeps overrides.yaml (the original flags), appending its
// own flags as a comment.
std::filesystem::path prepare_run_folder(dist::Communicator& comm, const RunFolderRequest& request);

// A new run folder whose set-up fails (its data cannot be opened, the model cannot be built)
// holds a config and a restart.sh that cannot work: while an exception leaves the scope this
// guard covers, rank 0 removes the folder (the files prepare_run_folder and write_run_context
// wrote, then the folder itself; anything else in it keeps it). Create it right after
// prepare_run_folder and let it end where training starts; a normal exit from the scope, or a
// resumed run's folder (`resumed`), is never touched.
class SetupGuard {
 public:
  SetupGuard(dist::Communicator& comm, std::filesystem::path run_dir, bool resumed);
  ~SetupGuard();
  SetupGuard(const SetupGuard&) = delete;
  SetupGuard& operator=(const SetupGuard&) = delete;

 private:
  dist::Communicator& comm_;
  std::filesystem::path run_dir_;
  bool armed_;
  int exceptions_;
};

// The run's context as system.json records it: host facts plus what the caller knows of the
// devices and the process grid. Rank 0 writes it and gets back what it wrote (other ranks: `info`
// as given); call on every rank (collective-free).
report::SystemInfo write_run_context(dist::Communicator& comm, const std::filesystem::path& run_dir,
                                     report::SystemInfo info);

}  // namespace scaffold::suite
