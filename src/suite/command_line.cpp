#include "suite/command_line.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/log.hpp"
#include "core/threads.hpp"

namespace scaffold::cli {

void add_threads_option(CLI::App* sub, int* threads) {
  *threads = core::default_thread_count();
  sub->add_option("--threads", *threads,
                  "compute threads per process (default: OMP_NUM_THREADS, else the CPUs available)")
      ->check(threads_validator())
      ->capture_default_str();
}

CLI::Validator threads_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int n = 0;
        if (CLI::detail::lexical_cast(text, n) && n >= 1 && n <= core::kMaxThreads) return "";
        // CLI11 puts "--threads: " before this.
        return text + ": expected an integer from 1 to " + std::to_string(core::kMaxThreads) +
               " compute threads per process (more than the node's hardware threads only slows "
               "the run)";
      },
      "1.." + std::to_string(core::kMaxThreads), "THREADS");
}

void add_config_files_option(CLI::App* sub, ConfigArgs* args) {
  sub->add_option(
         "-c,--config", args->files,
         "config YAML; repeat to layer files (later files override earlier ones key by key)")
      ->required()
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
}

namespace {

// `help` is the whole help text. The flag's text is read after parsing (so it outlives this
// call) and turned into a FlagValue by `convert`. Every flag is taken as text: CLI11 would clamp
// 99999999999999999999 to the largest int64 and print a converted value, where the loader's
// rules judge the text as a YAML file's and name what was typed.
template <typename Text>
CLI::Option* add_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                          const std::string& key, const std::string& help,
                          config::FlagValue (*convert)(const Text&)) {
  auto value = std::make_shared<Text>();
  CLI::Option* opt = sub->add_option(flag, *value, help);
  // A flag given twice keeps the last value, so `restart.sh --epochs 10` can override the
  // --epochs of the original command line.
  if constexpr (!std::is_same_v<Text, std::vector<std::string>>)
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const std::string name = flag.substr(0, flag.find(','));
  args->readers.push_back(
      [opt, value, key, name, convert]() -> std::optional<config::FlagOverride> {
        if (opt->count() == 0) return std::nullopt;
        return config::FlagOverride{key, name, convert(*value)};
      });
  return opt;
}

config::FlagValue string_value(const std::string& text) {
  return text;
}

}  // namespace

std::string schema_flag_name(const std::string& key) {
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

void add_schema_flag(CLI::App* sub, ConfigArgs* args, const config::KeyInfo& key) {
  const std::string flag = schema_flag_name(key.name);
  const std::string help = key.help + " (" + key.allowed + ")";
  switch (key.kind) {
    case config::Kind::kInteger:
      add_override<std::string>(sub, args, flag, key.name, help, config::integer_flag_value)
          ->type_name("INT");
      return;
    case config::Kind::kNumber:
      add_override<std::string>(sub, args, flag, key.name, help, config::number_flag_value)
          ->type_name("NUMBER");
      return;
    case config::Kind::kString:
      add_override<std::string>(sub, args, flag, key.name, help, string_value)->type_name("TEXT");
      return;
    case config::Kind::kIntList: {
      // As many values as the key allows; a wrong count, or values out of range, are the
      // loader's to report with the other problems.
      const int most =
          key.list_max > 0 ? static_cast<int>(key.list_max) : CLI::detail::expected_max_vector_size;
      const int fewest = std::max(1, static_cast<int>(key.list_min));
      std::string shown = "INT ...";
      if (key.list_max > 0) shown = "INT x " + std::to_string(most);
      if (key.list_max > 0 && fewest < most)
        shown = "INT x " + std::to_string(fewest) + "-" + std::to_string(most);
      add_override<std::vector<std::string>>(sub, args, flag, key.name, help,
                                             config::integer_list_flag_value)
          ->expected(fewest, most)
          ->type_name(shown);
      return;
    }
    case config::Kind::kBool: {
      // Taken as text and handed to the loader as 0/1 when it is what a config file may write
      // for a boolean (0, 1, true, false), so a flag reads like the file; other text is passed
      // on for the loader to reject by name.
      auto text = std::make_shared<std::string>();
      CLI::Option* opt = sub->add_option(flag, *text, help)->type_name("BOOL");
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      args->readers.push_back(
          [opt, text, key = key.name, flag]() -> std::optional<config::FlagOverride> {
            if (opt->count() == 0) return std::nullopt;
            return config::FlagOverride{key, flag, config::bool_flag_value(*text)};
          });
      return;
    }
  }
}

void check_skipped_keys(const std::vector<std::string>& skip,
                        const std::vector<std::string>& keys) {
  for (const std::string& name : skip) {
    if (std::find(keys.begin(), keys.end(), name) == keys.end())
      throw std::invalid_argument("add_schema_flags: '" + name + "' is not a config key");
  }
}

std::vector<config::FlagOverride> ConfigArgs::given_flags() const {
  std::vector<config::FlagOverride> flags;
  for (const auto& read : readers)
    if (auto flag = read()) flags.push_back(std::move(*flag));
  return flags;
}

config::LoadRequest ConfigArgs::request() const {
  config::LoadRequest request;
  request.config_files = files;
  request.flags = given_flags();
  return request;
}

namespace {

// The first line where two configurations' YAML differ, as "line (rank 0: line)"; the texts come
// from config::to_yaml, one key per line, so the line names the key.
std::string first_difference(const std::string& mine, const std::string& rank0) {
  std::istringstream a(mine), b(rank0);
  std::string la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "";
    if (!more_a) la = "(nothing)";
    if (!more_b) lb = "(nothing)";
    if (la != lb || !more_a || !more_b) return fmt::format("'{}' (rank 0: '{}')", la, lb);
  }
}

}  // namespace

std::string broadcast_config_yaml(dist::Communicator& comm,
                                  const std::function<LoadedYaml()>& load) {
  // Every rank loads its own command line, so a rank given other arguments (another data path, a
  // missing file) is found here instead of silently running rank 0's configuration.
  std::string payload, error;
  try {
    const LoadedYaml loaded = load();
    if (comm.rank() == 0)
      for (const auto& w : loaded.warnings) LOG_WARN("{}", w);
    payload = loaded.yaml;
  } catch (const std::exception& e) {
    error = core::error_text(e);
  }
  // Rank 0's verdict comes first: its error is the job's error.
  std::string verdict = error.empty() ? "ok" : "error";
  std::string rank0_verdict = verdict;
  comm.broadcast(rank0_verdict, 0);
  if (rank0_verdict != "ok") {
    std::string rank0_error = error;
    comm.broadcast(rank0_error, 0);
    throw dist::AgreedError(rank0_error);
  }
  std::string rank0_yaml = payload;
  comm.broadcast(rank0_yaml, 0);
  // Each rank's verdict on itself, gathered so every rank throws the same lowest-rank error.
  std::string mine;
  if (!error.empty()) {
    mine = fmt::format("rank {} could not load its configuration, which rank 0 could: {}",
                       comm.rank(), error);
  } else if (payload != rank0_yaml) {
    mine = fmt::format(
        "rank {}'s configuration differs from rank 0's: {}; every rank of one job must be given "
        "the same configuration files and flags",
        comm.rank(), first_difference(payload, rank0_yaml));
  }
  for (const std::string& verdict_of_rank : comm.allgather(mine))
    if (!verdict_of_rank.empty()) throw dist::AgreedError(verdict_of_rank);
  return rank0_yaml;
}

}  // namespace scaffold::cli
