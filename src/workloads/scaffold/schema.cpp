// Config's schema table (`scaffold benchmark`): every key with its kind, help, allowed values and
// range checks, in options.hpp order, plus the keys ScaFFold's files hold besides them (auxiliary,
// renamed). The scalar rules shared by every struct's table are in schema_rules.cpp.
#include "workloads/scaffold/schema.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "core/pyfloat.hpp"
#include "workloads/scaffold/model/kernel_choice.hpp"

namespace scaffold::config {
namespace {

using rules::at_least_0;
using rules::at_least_1;
using rules::bind_key;
using rules::bind_path;
using rules::bool_any;
using rules::kBoolAllowed;
using rules::non_empty;

// Volumes in the dataset (docs/dataset.md, 'What is generated'): instances per class rounded down
// to a multiple of n_fracts_per_vol, n_fracts_per_vol fractals per volume.
int64_t volume_count(const Config& c) {
  return int64_t{c.n_categories} * (c.n_instances_used_per_fractal / c.n_fracts_per_vol);
}

std::vector<KeySpec> scaffold_keys() {
  std::vector<KeySpec> t;
  const auto add = [&t](KeySpec spec) {
    t.push_back(std::move(spec));
    return t.size() - 1;
  };
  // A string key that takes one of `choices`: its allowed text is "one of" them.
  const auto add_choice = [&](const char* name, std::string Config::*member, const char* help,
                              std::vector<std::string> choices) {
    const auto i =
        add(bind_key(name, member, help, fmt::format("one of {}", fmt::join(choices, ", "))));
    t[i].choices = std::move(choices);
  };

  // Paths.
  add(rules::base_run_dir_key<Config>());
  add(bind_path("dataset_dir", &Config::dataset_dir, "dataset cache root", "a non-empty path",
                non_empty));
  add(bind_path("fract_base_dir", &Config::fract_base_dir, "root of the fractal library",
                "a non-empty path", non_empty));
  add(rules::job_name_key<Config>());
  add(rules::checkpoint_dir_key<Config>());

  // Problem size and data generation.
  add(rules::seed_key<Config>());
  {
    const auto i = add(bind_key(
        "problem_scale", &Config::problem_scale, "volume side is 2^problem_scale voxels",
        "an integer in [3, 15]",
        // 3 is the smallest scale with >= 2 points per fractal (2^(3s)/256); 15 keeps the
        // point and voxel counts in range.
        +[](const int& v) { return v >= 3 && v <= 15; }));
    t[i].floor_numbers = true;
  }
  {
    const auto i =
        add(bind_key("unet_bottleneck_dim", &Config::unet_bottleneck_dim,
                     "log2 of the U-Net bottleneck side (unet_layers = problem_scale - this)",
                     "an integer in [0, problem_scale - 1]", at_least_0));
    t[i].depends_on = {"problem_scale"};
    t[i].cross_check = [](const Config& c) {
      return c.unet_bottleneck_dim <= c.problem_scale - 1
                 ? std::string()
                 : fmt::format(
                       "an integer in [0, problem_scale - 1] = [0, {}] so that the "
                       "U-Net has at least one layer",
                       c.problem_scale - 1);
    };
  }
  add(bind_key("unet_base_channels", &Config::unet_base_channels,
               "extension: U-Net channels at the first level, doubled per level (ScaFFold: 64)",
               "an integer >= 1", at_least_1));
  add(bind_key("n_categories", &Config::n_categories,
               "fractal classes (the network has n_categories + 1 outputs)", "an integer >= 1",
               at_least_1));
  {
    const auto i =
        add(bind_key("n_instances_used_per_fractal", &Config::n_instances_used_per_fractal,
                     "instances drawn per class, rounded down to a multiple of n_fracts_per_vol",
                     "an integer >= n_fracts_per_vol", at_least_1));
    t[i].depends_on = {"n_fracts_per_vol"};
    t[i].cross_check = [](const Config& c) {
      return c.n_instances_used_per_fractal >= c.n_fracts_per_vol
                 ? std::string()
                 : fmt::format("an integer >= n_fracts_per_vol = {}", c.n_fracts_per_vol);
    };
  }
  add(bind_key("n_fracts_per_vol", &Config::n_fracts_per_vol, "fractals overlaid in each volume",
               "an integer >= 1", at_least_1));
  {
    const auto i = add(bind_key(
        "variance_threshold", &Config::variance_threshold,
        "IFS acceptance threshold (also names the library folder var<value>)",
        "a number >= 0 and below normalize^2", +[](const double& v) { return v >= 0.0; }));
    // Each axis is normalised to [-normalize, normalize], whose population variance is at most
    // normalize^2 (half the points at each end): at or above it no candidate can pass, and the
    // category search would never end.
    t[i].depends_on = {"normalize"};
    t[i].cross_check = [](const Config& c) {
      return c.variance_threshold < c.normalize * c.normalize
                 ? std::string()
                 : fmt::format(
                       "a number below normalize^2 = {}: a cloud normalised to [-normalize, "
                       "normalize] has a per-axis variance of at most normalize^2, so no "
                       "candidate could pass",
                       core::python_float_str(c.normalize * c.normalize));
    };
  }
  add(bind_key(
      "normalize", &Config::normalize, "half-range after normalisation in the category search",
      "a number > 0", +[](const double& v) { return v > 0.0; }));
  {
    const auto i = add(bind_key(
        "val_split", &Config::val_split, "validation percentage of the volumes",
        "a number in (0, 100) that leaves at least one validation and one training volume",
        +[](const double& v) { return v > 0.0 && v < 100.0; }));
    t[i].depends_on = {"n_categories", "n_instances_used_per_fractal", "n_fracts_per_vol"};
    t[i].cross_check = [](const Config& c) {
      const int64_t volumes = volume_count(c);
      // int(V * val_split / 100), as ScaFFold computes it (docs/dataset.md).
      const auto n_val =
          static_cast<int64_t>(std::floor(static_cast<double>(volumes) * c.val_split / 100.0));
      if (n_val >= 1 && volumes - n_val >= 1) return std::string();
      return fmt::format(
          "a percentage that leaves at least one validation and one training volume; {} volumes "
          "give {} validation and {} training",
          volumes, n_val, volumes - n_val);
    };
  }
  add(bind_key("datagen_batch_size", &Config::datagen_batch_size,
               "most category-search attempts one rank makes per synchronised round",
               "an integer >= 1", at_least_1));
  add(bind_key("datagen_from_scratch", &Config::datagen_from_scratch,
               "1 deletes the category and instance directories before generating", kBoolAllowed,
               bool_any));
  add(bind_key("dataset_reuse_enforce_commit_id", &Config::dataset_reuse_enforce_commit_id,
               "1 reuses a cached dataset only if it was made by the same git commit", kBoolAllowed,
               bool_any));

  // Distribution.
  {
    const auto i = add(bind_key(
        "dc_num_shards", &Config::dc_num_shards, "spatial shards per sharded dimension",
        "a list of 1 to 3 integers >= 1", +[](const std::vector<int>& v) {
          return !v.empty() && v.size() <= 3 &&
                 std::all_of(v.begin(), v.end(), [](int n) { return n >= 1; });
        }));
    t[i].list_min = 1;
    t[i].list_max = 3;
    // Every U-Net level halves each local extent: a shard must stay even down to the bottleneck
    // and hold at least one voxel there (docs/distributed.md, 'The process grid').
    t[i].depends_on = {"problem_scale", "unet_bottleneck_dim"};
    t[i].cross_check = [](const Config& c) {
      const int64_t multiple = int64_t{1} << c.unet_layers();
      for (int n : c.dc_num_shards) {
        if (c.vol_size() % (n * multiple) != 0)
          return fmt::format(
              "shard counts dividing the volume side {} so that each shard's side ({} / {}) stays "
              "even at every U-Net level and >= 1 at the bottleneck: a divisor of {} / 2^{} = {}",
              c.vol_size(), c.vol_size(), n, c.vol_size(), c.unet_layers(),
              c.vol_size() / multiple);
      }
      return std::string();
    };
  }
  {
    const auto i = add(bind_key(
        "dc_shard_dims", &Config::dc_shard_dims,
        "NCDHW dimensions to shard (2, 3, 4 = D, H, W), one per dc_num_shards entry",
        "a list of 1 to 3 distinct dimensions from 2, 3, 4, as long as dc_num_shards",
        +[](const std::vector<int>& v) {
          const std::set<int> distinct(v.begin(), v.end());
          return !v.empty() && v.size() <= 3 && distinct.size() == v.size() &&
                 std::all_of(v.begin(), v.end(), [](int d) { return d >= 2 && d <= 4; });
        }));
    t[i].list_min = 1;
    t[i].list_max = 3;
    t[i].depends_on = {"dc_num_shards"};
    t[i].cross_check = [](const Config& c) {
      return c.dc_shard_dims.size() == c.dc_num_shards.size()
                 ? std::string()
                 : fmt::format("as many entries as dc_num_shards ({}), got {}",
                               c.dc_num_shards.size(), c.dc_shard_dims.size());
    };
  }
  add_choice(
      "dc_groupnorm", &Config::dc_groupnorm,
      "extension: GroupNorm statistics of a sharded sample: local (per shard, as ScaFFold's "
      "DistConv: comparable with ScaFFold) or global (all-reduced: the sharded model equals the "
      "unsharded one)",
      {"local", "global"});
  add(rules::progress_timeout_key<Config>(/*extension=*/true));
  add(rules::dataloader_workers_key<Config>());

  // Model and training.
  add(bind_key("local_batch_size", &Config::local_batch_size,
               "batch size per data-parallel replica", "an integer >= 1", at_least_1));
  {
    const auto i = add(bind_key(
        "group_norm_groups", &Config::group_norm_groups, "GroupNorm groups in every U-Net block",
        // Every channel count is unet_base_channels * 2^k, so a divisor of the base divides all.
        "an integer >= 1 dividing unet_base_channels", at_least_1));
    t[i].depends_on = {"unet_base_channels"};
    t[i].cross_check = [](const Config& c) {
      return c.unet_base_channels % c.group_norm_groups == 0
                 ? std::string()
                 : fmt::format("a divisor of unet_base_channels ({}), the narrowest channel count",
                               c.unet_base_channels);
    };
  }
  add(rules::device_key<Config>(/*extension=*/true));
  add(rules::device_sharing_key<Config>(/*extension=*/true));
  add_choice(
      "memory_format", &Config::memory_format,
      "extension: layout of the U-Net's 5-D parameters and inputs: auto (channels-last on CUDA, "
      "contiguous on the CPU, where it measures no faster), channels_last or contiguous",
      {"auto", "channels_last", "contiguous"});
  add_choice(
      "conv_kernel", &Config::conv_kernel,
      "extension: the U-Net's 3^3 convolutions on the CPU: winograd (Winograd F(2,3) for the "
      "float32 layers where it pays, oneDNN for the rest), onednn (oneDNN at every batch size; "
      "LibTorch 1.13 sends batch 1 to a 3-5x slower path), libtorch, or auto (winograd on the "
      "CPU, libtorch on CUDA)",
      model::kernel_values::kConv);
  add_choice(
      "upconv_kernel", &Config::upconv_kernel,
      "extension: the U-Net's transposed convolutions (kernel 2, stride 2): gemm (one matrix "
      "product per sample scattered into the output, bf16 under autocast; CPU only), libtorch, "
      "or auto (gemm on the CPU, libtorch on CUDA)",
      model::kernel_values::kUpconv);
  add_choice("groupnorm_kernel", &Config::groupnorm_kernel,
             "extension: GroupNorm + ReLU of the U-Net blocks: fused (one CPU kernel, contiguous "
             "layout only), unfused (LibTorch's group_norm, then relu) or auto (unfused: the fused "
             "kernel measures slower in whole steps)",
             model::kernel_values::kGroupNorm);
  add_choice(
      "pool_kernel", &Config::pool_kernel,
      "extension: the U-Net's max pooling (kernel 2, stride 2): native (one CPU kernel, "
      "contiguous float32 or bf16, bf16 pooled in bf16), libtorch, or auto (native on the CPU, "
      "libtorch on CUDA)",
      model::kernel_values::kPool);
  add_choice("loss_kernel", &Config::loss_kernel,
             "extension: the loss's softmax sums (CE + soft Dice): fused (one CPU pass over the "
             "logits forward, one backward; float32), libtorch (LibTorch's operators, the "
             "reference), or auto (fused on the CPU, libtorch on CUDA)",
             model::kernel_values::kLoss);
  add_choice("head_kernel", &Config::head_kernel,
             "extension: the U-Net's 1x1x1 classifier head: gemm (one matrix product per sample; "
             "CPU only), libtorch (Conv3d), or auto (gemm on the CPU, libtorch on CUDA)",
             model::kernel_values::kHead);
  add_choice("optimizer_kernel", &Config::optimizer_kernel,
             "extension: Adam's step: fused (one pass over each parameter and its moments; CPU "
             "float32, optimizer ADAM only), libtorch (torch::optim::Adam), or auto (fused for "
             "ADAM on the CPU, libtorch otherwise)",
             model::kernel_values::kOptimizer);
  add(bind_key("activation_checkpointing", &Config::activation_checkpointing,
               "1 recomputes every U-Net block in the backward pass", kBoolAllowed, bool_any));
  {
    const auto i = add(bind_key("optimizer", &Config::optimizer, "optimizer",
                                "one of ADAM, RMSProp, SGD (any case)"));
    t[i].choices = {"ADAM", "RMSProp", "SGD"};
  }
  add(bind_key(
      "starting_learning_rate", &Config::starting_learning_rate,
      "initial learning rate (start of every cosine cycle)", "a number > 0",
      +[](const double& v) { return v > 0.0; }));
  {
    const auto i = add(bind_key(
        "min_learning_rate", &Config::min_learning_rate, "eta_min of the cosine schedule",
        "a number in [0, starting_learning_rate]", +[](const double& v) { return v >= 0.0; }));
    t[i].depends_on = {"starting_learning_rate"};
    t[i].cross_check = [](const Config& c) {
      return c.min_learning_rate <= c.starting_learning_rate
                 ? std::string()
                 : fmt::format("a number in [0, starting_learning_rate] = [0, {}]",
                               yaml_float(c.starting_learning_rate));
    };
  }
  add(bind_key("T_0", &Config::T_0, "epochs in the first cosine cycle", "an integer >= 1",
               at_least_1));
  add(bind_key("T_mult", &Config::T_mult, "cosine cycle growth factor", "an integer >= 1",
               at_least_1));
  add(bind_key("disable_scheduler", &Config::disable_scheduler,
               "1 keeps the learning rate constant", kBoolAllowed, bool_any));
  add(bind_key(
      "target_dice", &Config::target_dice, "validation Dice that ends the run",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add(bind_key(
      "epochs", &Config::epochs, "epoch cap; -1 runs until target_dice",
      "-1 (until target_dice) or an integer >= 1",
      +[](const int& v) { return v == -1 || v >= 1; }));
  add(bind_key("warmup_batches", &Config::warmup_batches,
               "untimed warm-up training batches per rank", "an integer >= 0", at_least_0));
  add(bind_key(
      "ce_weight_sample_fraction", &Config::ce_weight_sample_fraction,
      "fraction of training masks used to estimate the cross-entropy class weights",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add(bind_key("torch_amp", &Config::torch_amp, "1 runs the forward pass under bf16 autocast",
               kBoolAllowed, bool_any));
  add(bind_key("more_determinism", &Config::more_determinism,
               "1 selects deterministic algorithms (warn_only) and turns cuDNN's autotuner off "
               "(slower); 0 lets cuDNN autotune its convolutions",
               kBoolAllowed, bool_any));
  add(bind_key("loss_freq", &Config::loss_freq,
               "accepted for compatibility; unused (as in ScaFFold)", "an integer >= 1",
               at_least_1));
  {
    const auto i = add(
        bind_key("framework", &Config::framework, "training framework", "torch (the only one)"));
    t[i].choices = {"torch"};
  }
  add(bind_key(
      "dist", &Config::dist, "distributed mode; always on", "1 (distributed mode is always on)",
      +[](const int& v) { return v == 1; }));

  // Run folder and checkpoints.
  add(rules::checkpoint_interval_key<Config>());
  add(bind_key("train_from_scratch", &Config::train_from_scratch,
               "accepted, no effect: a fresh run always starts in a new, empty run directory and "
               "--run-dir resumes (ScaFFold forces 0 there), so there is nothing to delete",
               kBoolAllowed, bool_any));
  {
    const auto i = add(bind_key("async_save", &Config::async_save,
                                "1 writes checkpoint files from a background thread on rank 0 "
                                "(the state is copied first; the write overlaps the next epoch)",
                                kBoolAllowed, bool_any));
    t[i].bool_as_word = true;  // ScaFFold writes this one as a Python bool
  }

  return t;
}

}  // namespace

SchemaT<Config> build_schema(SchemaFor<Config>) {
  SchemaT<Config> s;
  s.command = "benchmark";
  s.keys = scaffold_keys();
  s.aux_keys = {"command",
                "config",
                "verbose",
                "restart",
                "run_dir",
                "run_iter",
                "benchmark_run_dir",
                "unet_layers",
                "vol_size",
                "point_num",
                "scheduler_metadata",
                "machine_name",
                "scale"};
  // A power of two from 2^3 to 2^15 (problem_scale's range) for vol_size, its cube / 256 for
  // point_num, and problem_scale - unet_bottleneck_dim (1 to 14) for unet_layers.
  const auto side_ok = [](long long v) { return v >= 8 && v <= (1LL << 15) && (v & (v - 1)) == 0; };
  s.derived_keys["vol_size"] = {"2^problem_scale",
                                [](const Config& c) -> long long { return c.vol_size(); },
                                [side_ok](long long v) {
                                  return side_ok(v) ? ""
                                                    : "a power of two from 8 (2^3) to 32768 (2^15)";
                                },
                                {"problem_scale"}};
  s.derived_keys["point_num"] = {
      "vol_size^3 / 256",
      [](const Config& c) -> long long { return c.point_num(); },
      [](long long v) {
        for (int scale = 3; scale <= 15; ++scale)
          if (v == (1LL << (3 * scale)) / 256) return std::string();
        return std::string("(2^problem_scale)^3 / 256 for a problem_scale from 3 to 15");
      },
      {"problem_scale"}};
  s.derived_keys["unet_layers"] = {
      "problem_scale - unet_bottleneck_dim",
      [](const Config& c) -> long long { return c.unet_layers(); },
      [](long long v) { return v >= 1 && v <= 15 ? "" : "an integer from 1 to 15"; },
      {"problem_scale", "unet_bottleneck_dim"}};
  s.moved_keys = {
      {"batch_size", "it was renamed 'local_batch_size'"},
      {"dataset_num_shards", "it was replaced by 'dc_num_shards' (shards per sharded dimension)"},
      {"dataset_shard_dims", "it was replaced by 'dc_shard_dims' (the dimensions to shard)"}};
  return s;
}

const std::vector<KeySpec>& schema() {
  return schema_of<Config>();
}

LoadedConfig load_config(const LoadRequest& request) {
  return load_config_as<Config>(request);
}

Config config_from_yaml_text(const std::string& text, const std::string& source) {
  return from_yaml_text<Config>(text, source);
}

SCAFFOLD_CONFIG_STRUCT(Config);

}  // namespace scaffold::config
