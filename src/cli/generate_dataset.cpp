// `scaffold generate_dataset`: the fractal library (if missing) and the dataset of a config,
// reused from the cache when one with the same key exists (spec §4). Lets users prepare data
// in a separate job before `scaffold benchmark`.
#include "cli/common.hpp"
#include "cli/phases.hpp"
#include "core/log.hpp"
#include "core/version.hpp"

namespace scaffold::cli {

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
  add_config_files_option(sub, args.get());
  add_threads_option(sub, threads.get());
  // The keys that shape the dataset; name and help come from the schema.
  add_schema_flags_for<config::Config>(sub, args.get(),
                                       {"problem_scale", "n_categories", "n_instances_used_per_fractal", "seed",
                                        "fract_base_dir", "dataset_dir", "dc_num_shards", "dc_shard_dims",
                                        "datagen_batch_size"});
  return {sub, [args, threads](RunContext& ctx) {
            ctx.threads = *threads;
            const config::Config cfg = load_config_everywhere(ctx.comm, *args);
            ensure_fractal_library(ctx, cfg);
            const auto info = ensure_dataset(ctx, cfg);
            LOG_INFO("dataset ready: {}", info.root.string());
            return 0;
          }};
}

}  // namespace scaffold::cli
