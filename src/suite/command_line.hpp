// What every subcommand shares: the run context (communicator, threads), the --threads and
// config-flag plumbing (flags generated from a config schema, or declared one by one), and
// loading the config once on rank 0 and broadcasting it. It lives in suite/, below the workloads
// that register their subcommands with it, and keeps the namespace cli its users know it by.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "dist/communicator.hpp"
#include "report/record_table.hpp"

namespace scaffold::cli {

struct RunContext {
  dist::Communicator& comm;
  int threads = 1;  // compute threads in this process
  // Signals that stop a training run cleanly (--stop-signals; suite::install_stop_signals).
  std::vector<int> stop_signals = {};
};

// Flags shared by the subcommands that read a config.
struct ConfigArgs {
  std::vector<std::string> files;  // -c, in order
  // One reader per declared override flag: yields the override when the flag was given.
  std::vector<std::function<std::optional<config::FlagOverride>()>> readers;
  std::vector<config::FlagOverride> given_flags() const;
  config::LoadRequest request() const;  // the files and the given flags
};

// --threads N (default: OMP_NUM_THREADS or the CPUs available to this process).
void add_threads_option(CLI::App* sub, int* threads);
// Its check: an integer in [1, core::kMaxThreads], with a message that says why.
CLI::Validator threads_validator();

// -c/--config, repeatable and required.
void add_config_files_option(CLI::App* sub, ConfigArgs* args);

// The flag of config key `key`: "--" + key with '_' written '-' (problem_scale -> --problem-scale,
// T_0 -> --T-0).
std::string schema_flag_name(const std::string& key);

// One override flag for `key` (schema_flag_name), typed by its kind: integer, number, string,
// boolean (0, 1, true or false) or a list of list_min to list_max integers. Help: the key's help
// and, in parentheses, what it allows.
void add_schema_flag(CLI::App* sub, ConfigArgs* args, const config::KeyInfo& key);

// Throws std::invalid_argument unless every name in `skip` is one of `keys`.
void check_skipped_keys(const std::vector<std::string>& skip, const std::vector<std::string>& keys);

// add_schema_flag for every key of C's schema (config::schema_of<C>()) except those in `skip`,
// in schema order. A name in `skip` that is not a key of C throws std::invalid_argument.
template <class C>
void add_schema_flags(CLI::App* sub, ConfigArgs* args, const std::vector<std::string>& skip = {}) {
  check_skipped_keys(skip, config::known_keys<C>());
  for (const auto& key : config::schema_of<C>()) {
    if (std::find(skip.begin(), skip.end(), key.name) == skip.end())
      add_schema_flag(sub, args, key);
  }
}

// add_schema_flag for the listed keys of C only, in the order given (a subcommand that uses a few
// keys). A name that is not a key of C throws std::invalid_argument.
template <class C>
void add_schema_flags_for(CLI::App* sub, ConfigArgs* args, const std::vector<std::string>& keys) {
  check_skipped_keys(keys, config::known_keys<C>());
  for (const std::string& name : keys) add_schema_flag(sub, args, *config::find_key<C>(name));
}

// What rank 0 loaded, as the text every rank parses.
struct LoadedYaml {
  std::string yaml;                   // config::to_yaml of the loaded struct
  std::vector<std::string> warnings;  // logged once, by rank 0
};

// Every rank runs `load` on its own command line; rank 0's YAML is the job's. Returns it on every
// rank, or throws the same dist::AgreedError on every rank: rank 0's load error, else the first
// rank whose load failed or whose YAML differs from rank 0's (naming the first differing line).
// Warnings are logged by rank 0 only.
std::string broadcast_config_yaml(dist::Communicator& comm,
                                  const std::function<LoadedYaml()>& load);

// Every rank loads and validates; every rank gets rank 0's C, or every rank throws the same
// dist::AgreedError (see broadcast_config_yaml). Warnings are logged once. C is any struct config/
// has a schema for.
template <class C>
C load_config_everywhere_as(dist::Communicator& comm, const ConfigArgs& args) {
  const std::string yaml = broadcast_config_yaml(comm, [&args] {
    const config::LoadedConfigT<C> loaded = config::load_config_as<C>(args.request());
    return LoadedYaml{config::to_yaml(loaded.config), loaded.warnings};
  });
  return config::from_yaml_text<C>(yaml, "configuration broadcast by rank 0");
}

// Subcommand registration: each returns the CLI11 subcommand and a runner to call after parsing:
// `run` inside MPI, or `run_without_mpi` for a subcommand that must not start it.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(RunContext&)> run;
  std::function<int()> run_without_mpi = {};
};

// What a suite workload's command line gives its driver: the same flags for every workload.
struct WorkloadArgs {
  ConfigArgs config;
  std::string run_dir;            // --run-dir: resume in this run folder (--restart needs it)
  std::vector<std::string> argv;  // the command line after the executable, for restart.sh
  std::map<std::string, bool> switches;  // a workload's own flags (SubcommandExtras), by name
  bool switch_on(const std::string& name) const {
    const auto it = switches.find(name);
    return it != switches.end() && it->second;
  }
};

// What a workload's subcommand has beyond the common flags: keys of its schema that take no flag
// (ScaFFold's fixed compatibility keys), and its own flags (add_flags writes their values into
// WorkloadArgs::switches; a std::map keeps the references it takes valid).
struct SubcommandExtras {
  std::vector<std::string> keys_without_flag;
  std::function<void(CLI::App* sub, WorkloadArgs* args)> add_flags;
};

// A suite workload's subcommand `name`: -c config files, --threads, its own flags (extras), one
// flag per key of C's schema (but extras' keys without one), --run-dir and --restart; `run` gets
// the parsed arguments with ctx.threads set.
template <class C>
Subcommand add_workload_subcommand(CLI::App& app, const std::string& name, const std::string& help,
                                   int argc, char** argv,
                                   std::function<int(RunContext&, const WorkloadArgs&)> run,
                                   const SubcommandExtras& extras = {}) {
  CLI::App* sub = app.add_subcommand(name, help);
  auto args = std::make_shared<WorkloadArgs>();
  for (int i = 1; i < argc; ++i) args->argv.emplace_back(argv[i]);
  auto threads = std::make_shared<int>(1);
  add_config_files_option(sub, &args->config);
  add_threads_option(sub, threads.get());
  if (extras.add_flags) extras.add_flags(sub, args.get());
  add_schema_flags<C>(sub, &args->config, extras.keys_without_flag);
  CLI::Option* run_dir =
      sub->add_option("--run-dir", args->run_dir, "resume in this run folder (implies --restart)");
  // --run-dir resumes with or without --restart; the flag is kept for ScaFFold's command lines.
  sub->add_flag("--restart", "resume from the run folder's last checkpoint; needs --run-dir")
      ->needs(run_dir);
  return {sub, [args, threads, run = std::move(run)](RunContext& ctx) {
            ctx.threads = *threads;
            return run(ctx, *args);
          }};
}

// `tables`: the suite workloads' result tables, in the order their groups are printed.
Subcommand add_report(CLI::App& app, std::vector<report::WorkloadTable> tables);
// `scaffold power -- COMMAND`: runs COMMAND while sampling power (jpwr-style wrapper).
Subcommand add_power(CLI::App& app);
// jpwr's command line puts COMMAND right after the options, "--" optional (argparse's REMAINDER:
// `jpwr --methods gh --df-out d stress-ng --cpu 4`); CLI11 would read COMMAND's own options as
// scaffold's. `args` is argv[1..]; when its subcommand is `power` (the subcommand `power` of
// `app`) and no "--" comes before COMMAND, "--" is inserted before the first word that is neither
// an option of power or of `app` nor an option's value (an option of several values takes the
// words up to the next one starting with '-', as CLI11 does). Anything else: `args` unchanged.
std::vector<std::string> separate_power_command(const CLI::App& app, const CLI::App& power,
                                                std::vector<std::string> args);

}  // namespace scaffold::cli
