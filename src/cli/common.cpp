#include "cli/common.hpp"

#include <memory>

#include "core/log.hpp"
#include "core/threads.hpp"

namespace scaffold::cli {

void add_threads_option(CLI::App* sub, int* threads) {
  *threads = core::default_thread_count();
  sub->add_option("--threads", *threads,
                  "compute threads per process (default: OMP_NUM_THREADS, else the CPUs available)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void add_config_files_option(CLI::App* sub, ConfigArgs* args) {
  sub->add_option("-c,--config", args->files,
                  "config YAML; repeat to layer files (later files override earlier ones key by key)")
      ->required()
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
}

namespace {

template <typename T>
void add_override(CLI::App* sub, ConfigArgs* args, const std::string& flag, const std::string& key,
                  const std::string& help, std::size_t count = 1) {
  auto value = std::make_shared<T>();  // outlives this call: read after parsing
  CLI::Option* opt = sub->add_option(flag, *value, help + " (config key '" + key + "')");
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    opt->expected(static_cast<int>(count));
  } else {
    // A flag given twice keeps the last value, so `restart.sh --epochs 10` can override the
    // --epochs of the original command line.
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  const std::string name = flag.substr(0, flag.find(','));
  args->readers.push_back([opt, value, key, name]() -> std::optional<config::FlagOverride> {
    if (opt->count() == 0) return std::nullopt;
    return config::FlagOverride{key, name, *value};
  });
}

}  // namespace

void add_int_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                      const std::string& key, const std::string& help) {
  add_override<int64_t>(sub, args, flag, key, help);
}
void add_float_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                        const std::string& key, const std::string& help) {
  add_override<double>(sub, args, flag, key, help);
}
void add_string_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                         const std::string& key, const std::string& help) {
  add_override<std::string>(sub, args, flag, key, help);
}
void add_int_list_override(CLI::App* sub, ConfigArgs* args, const std::string& flag,
                           const std::string& key, std::size_t count, const std::string& help) {
  add_override<std::vector<int64_t>>(sub, args, flag, key, help, count);
}

std::vector<config::FlagOverride> ConfigArgs::given_flags() const {
  std::vector<config::FlagOverride> flags;
  for (const auto& read : readers)
    if (auto flag = read()) flags.push_back(std::move(*flag));
  return flags;
}

config::Config load_config_everywhere(dist::Communicator& comm, const ConfigArgs& args) {
  std::string payload, error;
  if (comm.rank() == 0) {
    try {
      config::LoadRequest request;
      request.config_files = args.files;
      request.flags = args.given_flags();
      const config::LoadedConfig loaded = config::load_config(request);
      for (const auto& w : loaded.warnings) LOG_WARN("{}", w);
      payload = config::to_yaml(loaded.config);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // Rank 0's verdict is the job's verdict: broadcast it before anyone goes on.
  std::string verdict = error.empty() ? "ok" : "error";
  comm.broadcast(verdict, 0);
  if (verdict != "ok") {
    comm.broadcast(error, 0);
    throw dist::AgreedError(error);
  }
  comm.broadcast(payload, 0);
  return config::config_from_yaml_text(payload, "configuration broadcast by rank 0");
}

}  // namespace scaffold::cli
