// What every subcommand shares: the run context (communicator, threads), the --threads and
// config-flag plumbing, and loading the config once on rank 0 and broadcasting it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/load.hpp"
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
};

// --threads N (default: OMP_NUM_THREADS or the CPUs available to this process).
void add_threads_option(CLI::App* sub, int* threads);

// -c/--config, repeatable and required.
void add_config_files_option(CLI::App* sub, ConfigArgs* args);

// A flag that overrides config key `key` when given on the command line (even with the
// default's value: an explicit flag always wins, see docs/config.md).
void add_int_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                      const std::string& key, const std::string& help);
void add_float_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                        const std::string& key, const std::string& help);
void add_string_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                         const std::string& key, const std::string& help);
void add_int_list_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                           const std::string& key, std::size_t count, const std::string& help);

// Rank 0 loads and validates; every rank gets the same Config, or every rank throws the same
// dist::AgreedError. Warnings are logged once.
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
