// `scaffold generate_dataset`: the fractal library (if missing) and the dataset of a config,
// reused from the cache when one with the same key exists (docs/dataset.md). Lets users prepare
// data in a separate job before `scaffold benchmark`.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "suite/command_line.hpp"
#include "workloads/scaffold/data_phases.hpp"
#include "workloads/scaffold/dataset/estimate.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"
#include "workloads/scaffold/schema.hpp"
#include "workloads/scaffold/workload.hpp"

namespace scaffold::benchmark {
using cli::add_config_files_option;
using cli::add_schema_flags_for;
using cli::add_threads_option;
using cli::ConfigArgs;
using cli::Subcommand;
namespace fs = std::filesystem;

dataset::DatasetKey dataset_key(const config::Config& cfg) {
  dataset::DatasetKey key;
  key.n_categories = cfg.n_categories;
  key.n_instances_used_per_fractal = cfg.n_instances_used_per_fractal;
  key.problem_scale = cfg.problem_scale;
  key.seed = static_cast<uint64_t>(cfg.seed);
  key.variance_threshold = cfg.variance_threshold;
  key.n_fracts_per_vol = cfg.n_fracts_per_vol;
  key.val_split = cfg.val_split;
  key.dc_num_shards = cfg.dc_num_shards;
  key.dc_shard_dims = cfg.dc_shard_dims;
  return key;
}

void add_allow_large_data_flag(CLI::App* sub, bool* allow) {
  sub->add_flag(
      dataset::kAllowLargeDataFlag, *allow,
      "go ahead although the fractal library or dataset to write is estimated above 1 million "
      "files "
      "or 50 GiB, or above the free space of its file system (refused otherwise, before writing)");
}

void check_data_size(RunContext& ctx, const config::Config& cfg, bool with_dataset,
                     bool allow_large_data) {
  std::string problem;
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    std::vector<dataset::DiskEstimate> writes;
    // The library: categories not yet written, each with its instances. (Missing instances of
    // present categories are counted exactly, and checked, before they are written.)
    const fractal::LibraryLayout layout = fractal_library_layout(cfg);
    int64_t missing = cfg.n_categories;
    std::error_code ec;
    if (!cfg.datagen_from_scratch && fs::is_directory(layout.categories_dir(), ec)) {
      for (int c = 0; c < cfg.n_categories; ++c)
        if (fs::exists(layout.category_file(c), ec)) --missing;
    }
    writes.push_back(
        dataset::library_estimate(layout, missing, missing * fractal::kInstancesPerCategory));
    if (with_dataset) {
      const dataset::DatasetKey key = dataset_key(cfg);
      const std::string id = dataset::config_id(key);
      const fs::path id_dir = fs::path(cfg.dataset_dir) / id;
      const bool cached =
          fs::is_directory(id_dir, ec) &&
          dataset::find_reusable(id_dir, id,
                                 cfg.dataset_reuse_enforce_commit_id
                                     ? std::optional<std::string>(core::git_commit())
                                     : std::nullopt);
      if (!cached) writes.push_back(dataset::dataset_estimate(key, cfg.dataset_dir));
    }
    problem = dataset::disk_estimate_problem(writes, dataset::disk_limits());
    if (!problem.empty() && !allow_large_data) throw core::Error(problem);
  });
  if (!problem.empty())
    LOG_WARN("{} confirms a large write: {}", dataset::kAllowLargeDataFlag, problem);
}

dataset::DatasetInfo ensure_dataset(RunContext& ctx, const config::Config& cfg) {
  dataset::DatasetOptions o;
  o.key = dataset_key(cfg);
  o.dataset_dir = cfg.dataset_dir;
  o.library = fractal_library_layout(cfg);
  o.reuse_requires_same_commit = cfg.dataset_reuse_enforce_commit_id;
  o.code_commit = core::git_commit();
  o.threads = ctx.threads;
  return dataset::prepare_dataset(ctx.comm, o);
}

Subcommand add_generate_dataset(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "generate_dataset",
      "generate (or reuse from the cache) the training and validation volumes of a config");
  auto args = std::make_shared<ConfigArgs>();
  auto threads = std::make_shared<int>(1);
  auto allow_large = std::make_shared<bool>(false);
  add_config_files_option(sub, args.get());
  add_threads_option(sub, threads.get());
  add_allow_large_data_flag(sub, allow_large.get());
  // The keys that shape the dataset; name and help come from the schema.
  add_schema_flags_for<config::Config>(
      sub, args.get(),
      {"problem_scale", "n_categories", "n_instances_used_per_fractal", "seed", "fract_base_dir",
       "dataset_dir", "dc_num_shards", "dc_shard_dims", "datagen_batch_size"});
  return {sub, [args, threads, allow_large](RunContext& ctx) {
            ctx.threads = *threads;
            const config::Config cfg =
                cli::load_config_everywhere_as<config::Config>(ctx.comm, *args);
            check_data_size(ctx, cfg, /*with_dataset=*/true, *allow_large);
            ensure_fractal_library(ctx, cfg, *allow_large);
            const auto info = ensure_dataset(ctx, cfg);
            LOG_INFO("dataset ready: {}", info.root.string());
            return 0;
          }};
}

}  // namespace scaffold::benchmark
