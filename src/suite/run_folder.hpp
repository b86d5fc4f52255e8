// The run folder every workload writes (STYLE.md "every run records its context"): created
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
  std::string base_run_dir;    // parent of the run folders (config key base_run_dir)
  std::string job_name;        // folder name prefix (config key job_name)
  std::string checkpoint_dir;  // subfolder holding checkpoint_last / checkpoint_best
  std::string config_yaml;     // the merged, validated config as YAML
  std::string base_config_file;          // the first -c file, copied as base_config.yaml
  std::vector<std::string> flag_lines;   // "key: value" for each explicit flag, for overrides.yaml
  std::string resume_dir;                // non-empty: restart in this folder (--run-dir)
  std::vector<std::string> argv;         // the command line after the executable, for restart.sh
};

// "key: value" lines (YAML) for overrides.yaml, one per explicit flag.
std::vector<std::string> override_lines(const std::vector<config::FlagOverride>& flags);

// The request for a run of any workload's option struct C (each has base_run_dir, job_name and
// checkpoint_dir): `config_files` as given with -c, `flags` the explicit flags, `resume_dir` the
// --run-dir of a restart ("" for a new run), `argv` the command line after the executable.
template <class C>
RunFolderRequest run_folder_request(const C& cfg, const std::vector<std::string>& config_files,
                                    const std::vector<config::FlagOverride>& flags, const std::string& resume_dir,
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

// Collective: rank 0 creates (or, for a restart, checks) the folder and writes its files; every
// rank returns its absolute path. Errors are agreed (every rank throws dist::AgreedError).
std::filesystem::path prepare_run_folder(dist::Communicator& comm, const RunFolderRequest& request);

// The run's context as system.json records it: host facts plus what the caller knows of the
// devices and the process grid. Rank 0 writes it; call on every rank (collective-free).
void write_run_context(dist::Communicator& comm, const std::filesystem::path& run_dir, report::SystemInfo info);

}  // namespace scaffold::suite
