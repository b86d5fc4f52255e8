// What every subcommand shares: the run context (communicator, threads), the --threads and
// config-flag plumbing (flags generated from a config schema, or declared one by one), and
// loading the config once on rank 0 and broadcasting it.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "dist/communicator.hpp"

namespace scaffold::cli {

struct RunContext {
  dist::Communicator& comm;
  int threads = 1;  // compute threads in this process
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

// Rank 0 runs `load_on_rank0`; its YAML, or its error, is broadcast. Returns the YAML on every
// rank, or throws the same dist::AgreedError on every rank.
std::string broadcast_config_yaml(dist::Communicator& comm,
                                  const std::function<LoadedYaml()>& load_on_rank0);

// Rank 0 loads and validates; every rank gets the same C, or every rank throws the same
// dist::AgreedError. Warnings are logged once. C is any struct config/ has a schema for.
template <class C>
C load_config_everywhere_as(dist::Communicator& comm, const ConfigArgs& args) {
  const std::string yaml = broadcast_config_yaml(comm, [&args] {
    const config::LoadedConfigT<C> loaded = config::load_config_as<C>(args.request());
    return LoadedYaml{config::to_yaml(loaded.config), loaded.warnings};
  });
  return config::from_yaml_text<C>(yaml, "configuration broadcast by rank 0");
}
config::Config load_config_everywhere(dist::Communicator& comm, const ConfigArgs& args);

// Subcommand registration: each returns the CLI11 subcommand and a runner to call after parsing.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(RunContext&)> run;
};
Subcommand add_generate_fractals(CLI::App& app);
Subcommand add_generate_dataset(CLI::App& app);
// argv: the command line, recorded for restart.sh.
Subcommand add_benchmark(CLI::App& app, int argc, char** argv);
Subcommand add_report(CLI::App& app);
// `scaffold power -- COMMAND`: runs COMMAND while sampling power (jpwr-style wrapper).
Subcommand add_power(CLI::App& app);

}  // namespace scaffold::cli
