// The benchmark configuration: every key of ScaFFold's benchmark_default.yml with the same
// defaults (docs/config.md, 'Keys'), plus the keys the CLI adds. Built only by the config engine
// (YAML + flags -> validated Config; its schema: schema.cpp); immutable afterwards. Other modules
// take the option structs they need, derived from this one, and never see YAML or flag syntax.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::config {

struct Config {
  // Paths. Relative values are resolved against the working directory at load time.
  std::string base_run_dir = "benchmark_runs";  // parent of the run directories
  std::string dataset_dir = "datasets";         // dataset cache root
  std::string fract_base_dir = "fractals";      // fractal library root
  std::string job_name = "benchmark";           // run directory prefix
  std::string checkpoint_dir = "checkpoints";   // subdirectory of the run directory

  // Problem size and data generation.
  int64_t seed = 42;            // the single seed for everything
  int problem_scale = 7;        // volume side is 2^problem_scale voxels
  int unet_bottleneck_dim = 3;  // log2 of the bottleneck side
  int unet_base_channels = 64;  // extension: channels of the first level (ScaFFold: 64)
  int n_categories = 5;         // fractal classes (network has n_categories + 1 outputs)
  int n_instances_used_per_fractal = 145;
  int n_fracts_per_vol = 3;
  double variance_threshold = 0.15;   // IFS acceptance threshold (docs/fractals.md)
  double normalize = 1.0;             // half-range after normalisation in the category search
  double val_split = 30.0;            // validation percentage
  int datagen_batch_size = 10000;     // most category attempts one rank makes per round
  bool datagen_from_scratch = false;  // delete the library before generating
  bool dataset_reuse_enforce_commit_id = false;

  // Distribution (docs/distributed.md).
  std::vector<int> dc_num_shards{1, 1, 1};  // spatial shards per sharded dimension
  std::vector<int> dc_shard_dims{2, 3, 4};  // NCDHW dimensions to shard (2,3,4 = D,H,W)
  std::string dc_groupnorm = "local";  // extension: local (ScaFFold) | global GroupNorm statistics
  int progress_timeout_s = 1800;       // extension: end the job after this long without a step
  int dataloader_num_workers = 1;

  // Model and training (docs/benchmark.md).
  int local_batch_size = 1;
  int group_norm_groups = 8;
  std::string device = "auto";         // extension: auto | cpu | cuda
  bool device_sharing = false;         // extension: 1 lets ranks of a node share a GPU
  std::string memory_format = "auto";  // extension: auto | channels_last | contiguous
  std::string conv_kernel = "auto";    // extension: auto | winograd | onednn | libtorch (3^3 convs)
  std::string upconv_kernel =
      "auto";  // extension: auto | gemm | libtorch (the transposed convolutions)
  std::string groupnorm_kernel = "auto";  // extension: auto | fused | unfused GroupNorm + ReLU
  std::string pool_kernel = "auto";       // extension: auto | native | libtorch (MaxPool3d(2))
  std::string loss_kernel = "auto";       // extension: auto | fused | libtorch (CE + soft Dice)
  std::string head_kernel = "auto";       // extension: auto | gemm | libtorch (the 1x1x1 head)
  std::string optimizer_kernel = "auto";  // extension: auto | fused | libtorch (Adam's step)
  bool activation_checkpointing = false;
  std::string optimizer = "ADAM";  // ADAM | RMSProp | SGD
  double starting_learning_rate = 0.001;
  double min_learning_rate = 0.0001;
  int T_0 = 10;    // epochs in the first cosine cycle
  int T_mult = 2;  // cycle growth factor
  bool disable_scheduler = false;
  double target_dice = 0.95;
  int epochs = -1;  // -1: until target_dice
  int warmup_batches = 64;
  double ce_weight_sample_fraction = 0.1;
  bool torch_amp = true;  // bf16 autocast
  bool more_determinism = false;
  int loss_freq = 1;                // accepted, unused (as in ScaFFold)
  std::string framework = "torch";  // the only allowed value
  int dist = 1;                     // only 1 is allowed: distributed mode is always on

  // Run folder and checkpoints.
  int checkpoint_interval = -1;  // checkpoint every N epochs; <= 0 disables
  bool train_from_scratch = true;
  bool async_save = false;

  // Derived values (docs/config.md, 'Unknown, renamed and auxiliary keys').
  int unet_layers() const { return problem_scale - unet_bottleneck_dim; }
  int64_t vol_size() const { return int64_t{1} << problem_scale; }
  int64_t point_num() const { return (vol_size() * vol_size() * vol_size()) / 256; }
};

}  // namespace scaffold::config
