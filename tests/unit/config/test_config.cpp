// Tests for config loading: defaults, the shipped configs, every rejection rule, merge order and
// origins, problem_scale flooring, path resolution and the to_yaml round trip. Each test writes
// its YAML files into its own temporary directory.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "core/error.hpp"
#include "workloads/scaffold/options.hpp"
#include "workloads/scaffold/schema.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;

// The keys of ScaFFold's benchmark_default.yml, in its order (docs/config.md, 'Keys').
const std::vector<std::string> kScaffoldFileKeys = {"base_run_dir",
                                                    "dataset_dir",
                                                    "fract_base_dir",
                                                    "seed",
                                                    "dataloader_num_workers",
                                                    "dc_num_shards",
                                                    "dc_shard_dims",
                                                    "checkpoint_interval",
                                                    "n_categories",
                                                    "n_instances_used_per_fractal",
                                                    "problem_scale",
                                                    "unet_bottleneck_dim",
                                                    "target_dice",
                                                    "local_batch_size",
                                                    "optimizer",
                                                    "starting_learning_rate",
                                                    "min_learning_rate",
                                                    "T_0",
                                                    "T_mult",
                                                    "disable_scheduler",
                                                    "variance_threshold",
                                                    "n_fracts_per_vol",
                                                    "val_split",
                                                    "epochs",
                                                    "more_determinism",
                                                    "datagen_from_scratch",
                                                    "train_from_scratch",
                                                    "torch_amp",
                                                    "framework",
                                                    "checkpoint_dir",
                                                    "loss_freq",
                                                    "normalize",
                                                    "group_norm_groups",
                                                    "warmup_batches",
                                                    "activation_checkpointing",
                                                    "ce_weight_sample_fraction",
                                                    "dataset_reuse_enforce_commit_id"};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("scaffold_test_config_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  static LoadedConfig load(std::vector<std::string> files, std::vector<FlagOverride> flags = {},
                           bool resolve_paths = false) {
    LoadRequest request;
    request.config_files = std::move(files);
    request.flags = std::move(flags);
    request.resolve_paths = resolve_paths;
    return load_config(request);
  }

  // The message of the core::Error that loading throws; fails the test when nothing is thrown.
  static std::string load_error(std::vector<std::string> files,
                                std::vector<FlagOverride> flags = {}) {
    try {
      load(std::move(files), std::move(flags));
    } catch (const core::Error& e) {
      std::string message = e.what();
      EXPECT_EQ(message.rfind("invalid configuration:\n", 0), 0u) << message;
      return message;
    }
    ADD_FAILURE() << "load_config did not throw";
    return "";
  }

  // The one line of `message` that mentions `needle` (fails unless exactly one does).
  static std::string line_with(const std::string& message, const std::string& needle) {
    std::istringstream in(message);
    std::vector<std::string> hits;
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) hits.push_back(line);
    EXPECT_EQ(hits.size(), 1u) << "lines with '" << needle << "' in:\n" << message;
    return hits.empty() ? "" : hits[0];
  }

  static int problem_count(const std::string& message) {
    return static_cast<int>(std::count(message.begin(), message.end(), '\n'));
  }

  fs::path dir_;
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing: " << (needle)

// Every member, so a key that does not survive a trip is named.
void expect_same(const Config& a, const Config& b) {
  EXPECT_EQ(a.base_run_dir, b.base_run_dir);
  EXPECT_EQ(a.dataset_dir, b.dataset_dir);
  EXPECT_EQ(a.fract_base_dir, b.fract_base_dir);
  EXPECT_EQ(a.job_name, b.job_name);
  EXPECT_EQ(a.checkpoint_dir, b.checkpoint_dir);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.problem_scale, b.problem_scale);
  EXPECT_EQ(a.unet_bottleneck_dim, b.unet_bottleneck_dim);
  EXPECT_EQ(a.n_categories, b.n_categories);
  EXPECT_EQ(a.n_instances_used_per_fractal, b.n_instances_used_per_fractal);
  EXPECT_EQ(a.n_fracts_per_vol, b.n_fracts_per_vol);
  EXPECT_EQ(a.variance_threshold, b.variance_threshold);  // exact: floats must round-trip
  EXPECT_EQ(a.normalize, b.normalize);
  EXPECT_EQ(a.val_split, b.val_split);
  EXPECT_EQ(a.datagen_batch_size, b.datagen_batch_size);
  EXPECT_EQ(a.datagen_from_scratch, b.datagen_from_scratch);
  EXPECT_EQ(a.dataset_reuse_enforce_commit_id, b.dataset_reuse_enforce_commit_id);
  EXPECT_EQ(a.dc_num_shards, b.dc_num_shards);
  EXPECT_EQ(a.dc_shard_dims, b.dc_shard_dims);
  EXPECT_EQ(a.dataloader_num_workers, b.dataloader_num_workers);
  EXPECT_EQ(a.local_batch_size, b.local_batch_size);
  EXPECT_EQ(a.group_norm_groups, b.group_norm_groups);
  EXPECT_EQ(a.unet_base_channels, b.unet_base_channels);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.device_sharing, b.device_sharing);
  EXPECT_EQ(a.memory_format, b.memory_format);
  EXPECT_EQ(a.groupnorm_kernel, b.groupnorm_kernel);
  EXPECT_EQ(a.activation_checkpointing, b.activation_checkpointing);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.starting_learning_rate, b.starting_learning_rate);
  EXPECT_EQ(a.min_learning_rate, b.min_learning_rate);
  EXPECT_EQ(a.T_0, b.T_0);
  EXPECT_EQ(a.T_mult, b.T_mult);
  EXPECT_EQ(a.disable_scheduler, b.disable_scheduler);
  EXPECT_EQ(a.target_dice, b.target_dice);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.warmup_batches, b.warmup_batches);
  EXPECT_EQ(a.ce_weight_sample_fraction, b.ce_weight_sample_fraction);
  EXPECT_EQ(a.torch_amp, b.torch_amp);
  EXPECT_EQ(a.more_determinism, b.more_determinism);
  EXPECT_EQ(a.loss_freq, b.loss_freq);
  EXPECT_EQ(a.framework, b.framework);
  EXPECT_EQ(a.dist, b.dist);
  EXPECT_EQ(a.checkpoint_interval, b.checkpoint_interval);
  EXPECT_EQ(a.train_from_scratch, b.train_from_scratch);
  EXPECT_EQ(a.async_save, b.async_save);
}

// A valid config with every key away from its default (framework and dist have one value).
Config non_default_config() {
  Config c;
  c.base_run_dir = "/tmp/runs dir/x";  // a space forces quoting
  c.dataset_dir = "data: sets\t#x";    // ": " and " #" mean something to YAML when plain
  c.fract_base_dir = "fr\"acts\\#1";
  c.job_name = "true";               // a YAML boolean word as a string
  c.checkpoint_dir = "ckpt-\u00fc";  // UTF-8 passes through
  c.seed = int64_t{1} << 40;
  c.problem_scale = 9;
  c.unet_bottleneck_dim = 4;
  c.n_categories = 7;
  c.n_instances_used_per_fractal = 60;
  c.n_fracts_per_vol = 4;
  c.variance_threshold = 0.1 + 0.2;  // 0.30000000000000004
  c.normalize = 2.5;
  c.val_split = 12.5;
  c.datagen_batch_size = 77;
  c.datagen_from_scratch = true;
  c.dataset_reuse_enforce_commit_id = true;
  c.dc_num_shards = {2, 1};
  c.dc_shard_dims = {4, 2};
  c.dataloader_num_workers = 3;
  c.local_batch_size = 2;
  c.group_norm_groups = 16;
  c.device_sharing = true;
  c.memory_format = "channels_last";
  c.groupnorm_kernel = "unfused";
  c.activation_checkpointing = true;
  c.optimizer = "RMSProp";
  c.starting_learning_rate = 0.003;
  c.min_learning_rate = 1e-05;
  c.T_0 = 7;
  c.T_mult = 3;
  c.disable_scheduler = true;
  c.target_dice = 0.875;
  c.epochs = 12;
  c.warmup_batches = 5;
  c.ce_weight_sample_fraction = 1.0 / 3.0;
  c.torch_amp = false;
  c.more_determinism = true;
  c.loss_freq = 3;
  c.checkpoint_interval = 2;
  c.train_from_scratch = false;
  c.async_save = true;
  return c;
}

// ---- defaults and shipped configs -----------------------------------------------------------

// ScaFFold's defaults, written out from its configs/benchmark_default.yml and config code
// (docs/config.md, 'Keys'; unet_base_channels is its fixed 64, docs/benchmark.md), not
// read from Config: a default changed in options.hpp or the shipped file fails here.
void expect_scaffold_defaults(const Config& c, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(c.base_run_dir, "benchmark_runs");
  EXPECT_EQ(c.dataset_dir, "datasets");
  EXPECT_EQ(c.fract_base_dir, "fractals");
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.dataloader_num_workers, 1);
  EXPECT_EQ(c.dc_num_shards, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(c.dc_shard_dims, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(c.checkpoint_interval, -1);
  EXPECT_EQ(c.n_categories, 5);
  EXPECT_EQ(c.n_instances_used_per_fractal, 145);
  EXPECT_EQ(c.problem_scale, 7);
  EXPECT_EQ(c.unet_bottleneck_dim, 3);
  EXPECT_EQ(c.target_dice, 0.95);
  EXPECT_EQ(c.local_batch_size, 1);
  EXPECT_EQ(c.optimizer, "ADAM");
  EXPECT_EQ(c.starting_learning_rate, 0.001);
  EXPECT_EQ(c.min_learning_rate, 0.0001);
  EXPECT_EQ(c.T_0, 10);
  EXPECT_EQ(c.T_mult, 2);
  EXPECT_FALSE(c.disable_scheduler);
  EXPECT_EQ(c.variance_threshold, 0.15);
  EXPECT_EQ(c.n_fracts_per_vol, 3);
  EXPECT_EQ(c.val_split, 30.0);
  EXPECT_EQ(c.epochs, -1);
  EXPECT_FALSE(c.more_determinism);
  EXPECT_FALSE(c.datagen_from_scratch);
  EXPECT_TRUE(c.train_from_scratch);
  EXPECT_TRUE(c.torch_amp);
  EXPECT_EQ(c.framework, "torch");
  EXPECT_EQ(c.checkpoint_dir, "checkpoints");
  EXPECT_EQ(c.loss_freq, 1);
  EXPECT_EQ(c.normalize, 1.0);
  EXPECT_EQ(c.group_norm_groups, 8);
  EXPECT_EQ(c.warmup_batches, 64);
  EXPECT_FALSE(c.activation_checkpointing);
  EXPECT_EQ(c.ce_weight_sample_fraction, 0.1);
  EXPECT_FALSE(c.dataset_reuse_enforce_commit_id);
  // Accepted by ScaFFold's Config though not in its file, and its CLI's default (docs/config.md).
  EXPECT_EQ(c.job_name, "benchmark");
  EXPECT_FALSE(c.async_save);
  EXPECT_EQ(c.dist, 1);
  EXPECT_EQ(c.datagen_batch_size, 10000);
  EXPECT_EQ(c.unet_base_channels, 64);
}

TEST_F(ConfigTest, DefaultsAreScaffoldsWrittenOutInTheTest) {
  expect_scaffold_defaults(Config{}, "Config{}");
  expect_scaffold_defaults(load({}).config, "no config file");
  expect_scaffold_defaults(
      load({std::string(SCAFFOLD_SOURCE_DIR) + "/configs/benchmark_default.yml"}).config,
      "configs/benchmark_default.yml");
  // The check can fail: one key away from ScaFFold's value is caught.
  Config changed;
  changed.T_0 = 100;  // the value in older ScaFFold files
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_scaffold_defaults(changed, "T_0 = 100");
  }
  EXPECT_EQ(failures.size(), 1);
}

TEST_F(ConfigTest, DefaultsEqualConfigDefaults) {
  const LoadedConfig loaded = load({});
  expect_same(loaded.config, Config{});
  EXPECT_TRUE(loaded.warnings.empty());
  ASSERT_EQ(loaded.origin.size(), known_keys<Config>().size());
  for (const auto& [key, origin] : loaded.origin) EXPECT_EQ(origin, "default") << key;
}

TEST_F(ConfigTest, KnownKeysFollowOptionsOrderAndCoverScaffold) {
  const std::vector<std::string> keys = known_keys<Config>();
  EXPECT_EQ(keys.size(), 54u);
  EXPECT_EQ(keys.front(), "base_run_dir");
  EXPECT_EQ(keys.back(), "async_save");
  for (const std::string& key : kScaffoldFileKeys)
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  for (const char* extra :
       {"job_name", "async_save", "dist", "datagen_batch_size", "unet_base_channels", "device",
        "dc_groupnorm", "progress_timeout_s", "device_sharing", "memory_format", "conv_kernel",
        "upconv_kernel", "groupnorm_kernel", "pool_kernel", "loss_kernel", "head_kernel",
        "optimizer_kernel"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), extra), keys.end()) << extra;
}

TEST_F(ConfigTest, BenchmarkDefaultHasScaffoldKeysInOrderWithDefaults) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/configs/benchmark_default.yml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::vector<std::string> keys;
  const std::regex key_line(R"(^([A-Za-z_0-9]+):)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, key_line)) keys.push_back(m[1]);
  }
  // ScaFFold's keys in ScaFFold's order, then scaffold's extension keys.
  std::vector<std::string> expected = kScaffoldFileKeys;
  expected.push_back("unet_base_channels");
  expected.push_back("dc_groupnorm");
  EXPECT_EQ(keys, expected);
  const LoadedConfig loaded = load({path});
  expect_same(loaded.config, Config{});
  EXPECT_TRUE(loaded.warnings.empty());
  EXPECT_EQ(loaded.origin.at("seed"), path);
  EXPECT_EQ(loaded.origin.at("job_name"), "default");  // not in ScaFFold's file
}

TEST_F(ConfigTest, QuickstartLoads) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/configs/quickstart.yml";
  const LoadedConfig loaded = load({path});
  EXPECT_EQ(loaded.config.problem_scale, 5);
  EXPECT_EQ(loaded.config.unet_bottleneck_dim, 3);
  EXPECT_EQ(loaded.config.n_categories, 2);
  EXPECT_EQ(loaded.config.n_instances_used_per_fractal, 24);
  EXPECT_EQ(loaded.config.unet_base_channels, 16);
  EXPECT_EQ(loaded.config.local_batch_size, 2);
  EXPECT_TRUE(loaded.warnings.empty());
}

TEST_F(ConfigTest, DocsNameEveryKey) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string& key : known_keys<Config>()) EXPECT_CONTAINS(text, "| `" + key + "` |");
}

// ---- key names ------------------------------------------------------------------------------

TEST_F(ConfigTest, UnknownKeyNamedWithHint) {
  const std::string path = write("a.yml", "seed: 1\nproblem_scal: 5\nzzz_unrelated: 1\n");
  const std::string message = load_error({path});
  const std::string line = line_with(message, "problem_scal ");
  EXPECT_CONTAINS(line, path + ":2");
  EXPECT_CONTAINS(line, "unknown key");
  EXPECT_CONTAINS(line, "did you mean 'problem_scale'?");
  const std::string far = line_with(message, "zzz_unrelated");
  EXPECT_CONTAINS(far, "unknown key");
  EXPECT_EQ(far.find("did you mean"), std::string::npos);
}

TEST_F(ConfigTest, RenamedAndReplacedKeysExplained) {
  const std::string path = write(
      "a.yml", "batch_size: 2\ndataset_num_shards: [1, 1, 1]\ndataset_shard_dims: [2, 3, 4]\n");
  const std::string message = load_error({path});
  EXPECT_CONTAINS(line_with(message, "batch_size = 2"), "renamed 'local_batch_size'");
  EXPECT_CONTAINS(line_with(message, "dataset_num_shards"), "replaced by 'dc_num_shards'");
  EXPECT_CONTAINS(line_with(message, "dataset_shard_dims"), "replaced by 'dc_shard_dims'");
}

TEST_F(ConfigTest, AuxKeysAcceptedAndIgnored) {
  const std::string path = write("aux.yml",
                                 "command: benchmark\n"
                                 "config: [a.yml, b.yml]\n"
                                 "verbose: 1\n"
                                 "restart: false\n"
                                 "run_dir: null\n"
                                 "run_iter: /x/run\n"
                                 "benchmark_run_dir: /x\n"
                                 "unet_layers: 4\n"
                                 "vol_size: 128\n"
                                 "point_num: 8192\n"
                                 "scheduler_metadata: {scheduler: slurm, job_id: 12}\n"
                                 "machine_name: node01\n"
                                 "scale: 1\n"
                                 "seed: 3\n");
  const LoadedConfig loaded = load({path});
  EXPECT_EQ(loaded.config.seed, 3);
  EXPECT_EQ(loaded.origin.count("vol_size"), 0u);
}

// vol_size, point_num and unet_layers follow from problem_scale and unet_bottleneck_dim: a value
// no setting can give is refused, naming the rule; a possible but different one is a warning.
TEST_F(ConfigTest, DerivedAuxKeyNoSettingCanGiveIsRefusedNamingTheRule) {
  const std::string path = write("vol.yml", "problem_scale: 6\nvol_size: 0\n");
  const std::string line = line_with(load_error({path}), "vol_size = 0");
  EXPECT_CONTAINS(line, "vol.yml:2");
  EXPECT_CONTAINS(line, "a power of two from 8");
  EXPECT_CONTAINS(line, "problem_scale = 6");
  const std::string layers = write("layers.yml", "unet_layers: many\n");
  EXPECT_CONTAINS(line_with(load_error({layers}), "unet_layers = many"), "expected an integer");
  const std::string points = write("points.yml", "point_num: 1000\n");
  EXPECT_CONTAINS(line_with(load_error({points}), "point_num = 1000"), "/ 256");
}

TEST_F(ConfigTest, DerivedAuxKeyThatDiffersIsIgnoredWithAWarningAndAMatchingOneSilently) {
  const std::string differs = write("d.yml", "problem_scale: 6\nvol_size: 128\n");
  const LoadedConfig loaded = load({differs});
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_CONTAINS(loaded.warnings[0], "vol_size = 128 is ignored");
  EXPECT_CONTAINS(loaded.warnings[0], "gives 64");
  EXPECT_EQ(loaded.config.vol_size(), 64);
  const std::string matches =
      write("m.yml",
            "problem_scale: 7\nunet_bottleneck_dim: 3\nvol_size: 128\npoint_num: 8192\n"
            "unet_layers: 4\n");
  EXPECT_TRUE(load({matches}).warnings.empty());
}

TEST_F(ConfigTest, DuplicateKeyInOneFileRejected) {
  const std::string path = write("a.yml", "seed: 1\nseed: 2\n");
  EXPECT_CONTAINS(line_with(load_error({path}), "seed = 2"), "given twice");
}

TEST_F(ConfigTest, UnknownFlagKeyRejected) {
  const std::string message = load_error({}, {{"problem_scal", "--problem-scal", int64_t{5}}});
  EXPECT_CONTAINS(line_with(message, "--problem-scal"), "did you mean 'problem_scale'?");
}

// ---- values ---------------------------------------------------------------------------------

TEST_F(ConfigTest, ListForScalarRejectedAsSweepNamingEveryKey) {
  const std::string path = write("sweep.yml",
                                 "problem_scale: [5, 6]\n"
                                 "seed: 1\n"
                                 "optimizer: [ADAM, SGD]\n"
                                 "starting_learning_rate: [0.1, 0.01]\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 3) << message;
  for (const char* key : {"problem_scale = [5, 6]", "optimizer = [ADAM, SGD]",
                          "starting_learning_rate = [0.1, 0.01]"}) {
    const std::string line = line_with(message, key);
    EXPECT_CONTAINS(line, "parameter sweeps are not supported");
    EXPECT_CONTAINS(line, "one run per setting");
    EXPECT_CONTAINS(line, "JUBE");
  }
}

TEST_F(ConfigTest, BoolForNCategoriesRejected) {
  const std::string path = write("a.yml", "n_categories: true\n");
  const std::string line = line_with(load_error({path}), "n_categories = true");
  EXPECT_CONTAINS(line, "an integer >= 1");
  EXPECT_CONTAINS(line, "boolean");
}

TEST_F(ConfigTest, NonIntegerForIntegerKeyRejected) {
  const std::string path =
      write("a.yml", "local_batch_size: 2.5\nwarmup_batches: \"4\"\nT_0: 3.0\nseed: abc\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 4) << message;
  EXPECT_CONTAINS(line_with(message, "local_batch_size = 2.5"), "non-integer");
  EXPECT_CONTAINS(line_with(message, "warmup_batches = \"4\""), "got a string");
  line_with(message, "T_0 = 3.0");
  line_with(message, "seed = abc");
}

TEST_F(ConfigTest, NullValueRejected) {
  const std::string path = write("a.yml", "seed:\nproblem_scale: ~\n");
  const std::string message = load_error({path});
  EXPECT_CONTAINS(line_with(message, "seed ="), "no value");
  EXPECT_CONTAINS(line_with(message, "problem_scale ="), "no value");
}

TEST_F(ConfigTest, NumberKeysRejectBooleansAndNonFinite) {
  const std::string path = write(
      "a.yml", "variance_threshold: true\nnormalize: .inf\ntarget_dice: .nan\nval_split: 25\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 3) << message;
  EXPECT_CONTAINS(line_with(message, "variance_threshold"), "boolean");
  EXPECT_CONTAINS(line_with(message, "normalize ="), "non-finite");
  EXPECT_CONTAINS(line_with(message, "target_dice"), "non-finite");
}

TEST_F(ConfigTest, BoolKeysAcceptOnlyZeroOneTrueFalse) {
  const LoadedConfig ok = load({write("ok.yml",
                                      "torch_amp: 0\nmore_determinism: 1\nasync_save: true\n"
                                      "train_from_scratch: false\n")});
  EXPECT_FALSE(ok.config.torch_amp);
  EXPECT_TRUE(ok.config.more_determinism);
  EXPECT_TRUE(ok.config.async_save);
  EXPECT_FALSE(ok.config.train_from_scratch);
  const std::string message =
      load_error({write("bad.yml", "torch_amp: 2\nactivation_checkpointing: yes\n")});
  EXPECT_CONTAINS(line_with(message, "torch_amp = 2"), "0, 1, true or false");
  EXPECT_CONTAINS(line_with(message, "activation_checkpointing = yes"), "0, 1, true or false");
}

TEST_F(ConfigTest, StringKeyRejectsMapping) {
  const std::string message = load_error({write("a.yml", "job_name: {a: 1}\n")});
  EXPECT_CONTAINS(line_with(message, "job_name = {a: 1}"), "not a mapping");
}

TEST_F(ConfigTest, NegativeScaleRejected) {
  const std::string path = write("a.yml", "problem_scale: -1\n");
  const std::string message = load_error({path});
  EXPECT_CONTAINS(line_with(message, "problem_scale = -1"), "[3, 15]");
  // The default bottleneck (3) is not blamed for a scale that is itself invalid.
  EXPECT_EQ(message.find("unet_bottleneck_dim"), std::string::npos) << message;
}

TEST_F(ConfigTest, BottleneckOutsideRangeNamesBothKeys) {
  const std::string path = write("a.yml", "problem_scale: 4\nunet_bottleneck_dim: 4\n");
  const std::string line = line_with(load_error({path}), "unet_bottleneck_dim = 4");
  EXPECT_CONTAINS(line, path + ":2");
  EXPECT_CONTAINS(line, "[0, 3]");
  EXPECT_CONTAINS(line, "problem_scale = 4 from " + path + ":1");

  // The default bottleneck (3) against a smaller scale: the default is named as such.
  const std::string small = write("b.yml", "problem_scale: 3\n");
  const std::string line2 = line_with(load_error({small}), "unet_bottleneck_dim = 3");
  EXPECT_EQ(line2.rfind("  default: ", 0), 0u) << line2;
  EXPECT_CONTAINS(line2, "problem_scale = 3 from " + small);

  const std::string negative = write("c.yml", "unet_bottleneck_dim: -1\n");
  line_with(load_error({negative}), "unet_bottleneck_dim = -1");
}

TEST_F(ConfigTest, ShardListLengthMismatchRejected) {
  const std::string path = write("a.yml", "dc_num_shards: [2, 1]\n");
  const std::string line = line_with(load_error({path}), "dc_shard_dims");
  EXPECT_CONTAINS(line, "default: dc_shard_dims = [2, 3, 4]");
  EXPECT_CONTAINS(line, "dc_num_shards = [2, 1] from " + path);
  const LoadedConfig ok = load({path, write("b.yml", "dc_shard_dims: [3, 4]\n")});
  EXPECT_EQ(ok.config.dc_num_shards, (std::vector<int>{2, 1}));
  EXPECT_EQ(ok.config.dc_shard_dims, (std::vector<int>{3, 4}));
}

// Each U-Net level halves a shard's side: it must stay even down to the bottleneck
// (docs/distributed.md, 'The process grid').
TEST_F(ConfigTest, ShardCountsMustKeepEveryLevelEven) {
  // Scale 5 (side 32), bottleneck 3: 2 layers, so side / shards must be a multiple of 4.
  const std::string ok = write("ok.yml", "problem_scale: 5\ndc_num_shards: [8, 1, 1]\n");
  EXPECT_EQ(load({ok}).config.dc_num_shards, (std::vector<int>{8, 1, 1}));
  const std::string path = write("a.yml", "problem_scale: 5\ndc_num_shards: [16, 1, 1]\n");
  const std::string line = line_with(load_error({path}), "dc_num_shards = [16, 1, 1]");
  EXPECT_CONTAINS(line, "stays even at every U-Net level");
  EXPECT_CONTAINS(line, "a divisor of 32 / 2^2 = 8");
  EXPECT_CONTAINS(line, "problem_scale = 5 from " + path);
  line_with(load_error({write("b.yml", "problem_scale: 5\ndc_num_shards: [1, 3, 1]\n")}),
            "dc_num_shards = [1, 3, 1]");
}

// The default is ScaFFold's per-shard statistics (issue 14: comparable with ScaFFold by default);
// global is the option that makes a sharded model equal the unsharded one.
TEST_F(ConfigTest, GroupNormModeIsLocalByDefaultOrGlobal) {
  EXPECT_EQ(load({write("a.yml", "problem_scale: 5\n")}).config.dc_groupnorm, "local");
  EXPECT_EQ(load({write("b.yml", "dc_groupnorm: global\n")}).config.dc_groupnorm, "global");
  EXPECT_CONTAINS(
      line_with(load_error({write("c.yml", "dc_groupnorm: shard\n")}), "dc_groupnorm = shard"),
      "local, global");
}

TEST_F(ConfigTest, BadShardDimsRejected) {
  EXPECT_CONTAINS(line_with(load_error({write("a.yml", "dc_shard_dims: [1, 2, 3]\n")}),
                            "dc_shard_dims = [1, 2, 3]"),
                  "from 2, 3, 4");
  line_with(load_error({write("b.yml", "dc_shard_dims: [2, 2, 3]\n")}),
            "dc_shard_dims = [2, 2, 3]");
  line_with(load_error({write("c.yml", "dc_shard_dims: [2, x, 4]\n")}),
            "dc_shard_dims = [2, x, 4]");
  line_with(load_error({write("d.yml", "dc_num_shards: [1, 0, 1]\n")}),
            "dc_num_shards = [1, 0, 1]");
  line_with(load_error({write("e.yml", "dc_num_shards: 2\n")}), "dc_num_shards = 2");
}

TEST_F(ConfigTest, OptimizerChoices) {
  const std::string line =
      line_with(load_error({write("a.yml", "optimizer: adamw\n")}), "optimizer = adamw");
  EXPECT_CONTAINS(line, "ADAM, RMSProp, SGD");
  EXPECT_EQ(load({write("b.yml", "optimizer: rmsprop\n")}).config.optimizer, "RMSProp");
  EXPECT_EQ(load({write("c.yml", "optimizer: sgd\n")}).config.optimizer, "SGD");
}

TEST_F(ConfigTest, DistZeroRejected) {
  EXPECT_CONTAINS(line_with(load_error({write("a.yml", "dist: 0\n")}), "dist = 0"),
                  "distributed mode is always on");
}

TEST_F(ConfigTest, OtherFrameworkRejected) {
  EXPECT_CONTAINS(line_with(load_error({write("a.yml", "framework: jax\n")}), "framework = jax"),
                  "torch");
}

TEST_F(ConfigTest, ValSplitMustLeaveValidationAndTraining) {
  // 1 category x 3 instances / 3 per volume = 1 volume: 30% of it is 0 validation volumes.
  const std::string path =
      write("a.yml", "n_categories: 1\nn_instances_used_per_fractal: 3\nn_fracts_per_vol: 3\n");
  const std::string line = line_with(load_error({path}), "val_split");
  EXPECT_EQ(line.rfind("  default: val_split = 30.0", 0), 0u) << line;
  EXPECT_CONTAINS(line, "1 volumes give 0 validation and 1 training");
  EXPECT_CONTAINS(line, "n_categories = 1 from " + path);

  // 99% of 240 volumes leaves 3 for training: fine. 100 is out of range on its own.
  EXPECT_EQ(load({write("b.yml", "val_split: 99\n")}).config.val_split, 99.0);
  EXPECT_CONTAINS(line_with(load_error({write("c.yml", "val_split: 100\n")}), "val_split = 100"),
                  "(0, 100)");
}

TEST_F(ConfigTest, InstancesMustCoverOneVolume) {
  const std::string path = write("a.yml", "n_instances_used_per_fractal: 2\n");
  const std::string line = line_with(load_error({path}), "n_instances_used_per_fractal = 2");
  EXPECT_CONTAINS(line, "n_fracts_per_vol = 3 by default");
}

TEST_F(ConfigTest, OtherRangesRejected) {
  const std::string path = write("a.yml",
                                 "seed: -1\n"
                                 "group_norm_groups: 3\n"
                                 "epochs: 0\n"
                                 "min_learning_rate: 0.01\n"
                                 "target_dice: 1.5\n"
                                 "checkpoint_interval: -2\n"
                                 "job_name: a/b\n"
                                 "dataset_dir: \"\"\n");
  const std::string message = load_error({path});
  EXPECT_EQ(problem_count(message), 8) << message;
  EXPECT_CONTAINS(line_with(message, "min_learning_rate = 0.01"),
                  "starting_learning_rate = 0.001 by default");
  EXPECT_CONTAINS(line_with(message, "group_norm_groups = 3"), "unet_base_channels (64)");
  line_with(message, "job_name = a/b");
}

TEST_F(ConfigTest, GroupNormGroupsMustDivideTheBaseChannels) {
  EXPECT_EQ(load({write("ok.yml", "unet_base_channels: 12\ngroup_norm_groups: 4\n")})
                .config.unet_base_channels,
            12);
  const std::string message =
      load_error({write("bad.yml", "unet_base_channels: 12\ngroup_norm_groups: 8\ndevice: tpu\n")});
  EXPECT_EQ(problem_count(message), 2) << message;
  EXPECT_CONTAINS(line_with(message, "group_norm_groups = 8"), "unet_base_channels (12)");
  EXPECT_CONTAINS(line_with(message, "device = tpu"), "auto, cpu, cuda");
}

TEST_F(ConfigTest, AllProblemsInOneError) {
  const std::string a = write("a.yml", "n_categories: 0\nbogus: 1\n");
  const std::string b = write("b.yml", "optimizer: foo\n");
  const std::string message = load_error({a, b}, {{"dist", "--dist", int64_t{2}}});
  EXPECT_EQ(problem_count(message), 4) << message;
  EXPECT_CONTAINS(line_with(message, "n_categories"), a + ":1");
  EXPECT_CONTAINS(line_with(message, "bogus"), a + ":2");
  EXPECT_CONTAINS(line_with(message, "optimizer"), b + ":1");
  EXPECT_CONTAINS(line_with(message, "dist = 2"), "--dist");
}

TEST_F(ConfigTest, ProblemScaleFlooredWithWarning) {
  const std::string path = write("a.yml", "problem_scale: 5.7\n");
  const LoadedConfig loaded = load({path});
  EXPECT_EQ(loaded.config.problem_scale, 5);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_CONTAINS(loaded.warnings[0], "problem_scale = 5.7");
  EXPECT_CONTAINS(loaded.warnings[0], "floored to 5");
  EXPECT_CONTAINS(loaded.warnings[0], path);
  EXPECT_TRUE(load({write("b.yml", "problem_scale: 6.0\n")}).warnings.empty());
}

// ---- files --------------------------------------------------------------------------------

TEST_F(ConfigTest, MissingFileNamed) {
  const std::string path = (dir_ / "nope.yml").string();
  EXPECT_CONTAINS(line_with(load_error({path}), path), "no such file");
  EXPECT_CONTAINS(line_with(load_error({dir_.string()}), dir_.string()), "directory");
}

TEST_F(ConfigTest, YamlSyntaxErrorNamesFileAndLine) {
  const std::string path = write("broken.yml", "seed: 1\nproblem_scale: [5,\n");
  const std::string line = line_with(load_error({path}), path);
  EXPECT_CONTAINS(line, "YAML syntax error");
  EXPECT_TRUE(std::regex_search(line, std::regex(":[0-9]+:[0-9]+: YAML syntax error"))) << line;
}

TEST_F(ConfigTest, TopLevelMustBeMapping) {
  const std::string list = write("list.yml", "- 1\n- 2\n");
  EXPECT_CONTAINS(line_with(load_error({list}), list), "top level must be a mapping");
  const std::string scalar = write("scalar.yml", "hello\n");
  EXPECT_CONTAINS(line_with(load_error({scalar}), scalar), "top level must be a mapping");
  const std::string two = write("two.yml", "seed: 1\n---\nseed: 2\n");
  EXPECT_CONTAINS(line_with(load_error({two}), two), "2 YAML documents");
}

// An empty file is an error (issue 16): most often a wrong or truncated file, never a wish to
// run on defaults. More cases in test_config_strict.cpp.
TEST_F(ConfigTest, EmptyFileIsAnError) {
  const std::string path = write("empty.yml", "# nothing here\n");
  EXPECT_CONTAINS(line_with(load_error({path}), path), "sets no keys");
}

// ---- merge order and origins ----------------------------------------------------------------

TEST_F(ConfigTest, PrecedenceDefaultFilesFlagsWithOrigins) {
  const std::string a = write("a.yml", "seed: 1\nproblem_scale: 6\nn_categories: 3\n");
  const std::string b = write("b.yml", "problem_scale: 5\nn_categories: 4\n");
  const LoadedConfig loaded =
      load({a, b}, {{"n_categories", "--n-categories", int64_t{9}},
                    {"starting_learning_rate", "--starting-learning-rate", 0.25}});
  EXPECT_EQ(loaded.config.seed, 1);
  EXPECT_EQ(loaded.config.problem_scale, 5);
  EXPECT_EQ(loaded.config.n_categories, 9);
  EXPECT_EQ(loaded.config.starting_learning_rate, 0.25);
  EXPECT_EQ(loaded.config.local_batch_size, 1);
  EXPECT_EQ(loaded.origin.at("seed"), a);
  EXPECT_EQ(loaded.origin.at("problem_scale"), b);
  EXPECT_EQ(loaded.origin.at("n_categories"), "--n-categories");
  EXPECT_EQ(loaded.origin.at("starting_learning_rate"), "--starting-learning-rate");
  EXPECT_EQ(loaded.origin.at("local_batch_size"), "default");
}

TEST_F(ConfigTest, LaterFileOverridesAnInvalidEarlierValue) {
  const std::string a = write("a.yml", "problem_scale: [5, 6]\n");
  const std::string b = write("b.yml", "problem_scale: 6\n");
  EXPECT_EQ(load({a, b}).config.problem_scale, 6);
}

TEST_F(ConfigTest, FlagEqualToDefaultStillWinsOverFile) {
  // ScaFFold ignored a flag equal to its argparse default; here an explicit flag always wins.
  const std::string path = write("a.yml", "seed: 7\noptimizer: SGD\n");
  const LoadedConfig loaded = load(
      {path}, {{"seed", "--seed", int64_t{42}}, {"optimizer", "--optimizer", std::string("ADAM")}});
  EXPECT_EQ(loaded.config.seed, 42);
  EXPECT_EQ(loaded.config.optimizer, "ADAM");
  EXPECT_EQ(loaded.origin.at("seed"), "--seed");
}

TEST_F(ConfigTest, FlagValueTypesChecked) {
  const std::string message =
      load_error({}, {{"seed", "--seed", std::string("12")},
                      {"local_batch_size", "--local-batch-size", 2.5},
                      {"torch_amp", "--torch-amp", int64_t{2}},
                      {"problem_scale", "--problem-scale", std::vector<int64_t>{5, 6}},
                      {"dc_num_shards", "--dc-num-shards", int64_t{2}}});
  EXPECT_EQ(problem_count(message), 5) << message;
  EXPECT_CONTAINS(line_with(message, "--seed"), "seed = 12");
  EXPECT_CONTAINS(line_with(message, "--local-batch-size"), "local_batch_size = 2.5");
  EXPECT_CONTAINS(line_with(message, "--torch-amp"), "0, 1, true or false");
  EXPECT_CONTAINS(line_with(message, "--problem-scale"), "parameter sweeps are not supported");
  line_with(message, "--dc-num-shards");

  const LoadedConfig ok =
      load({}, {{"torch_amp", "--torch-amp", int64_t{0}},
                {"val_split", "--val-split", int64_t{20}},
                {"dc_num_shards", "--dc-num-shards", std::vector<int64_t>{2, 2, 1}},
                {"fract_base_dir", "--fract-base-dir", std::string("42")}});
  EXPECT_FALSE(ok.config.torch_amp);
  EXPECT_EQ(ok.config.val_split, 20.0);
  EXPECT_EQ(ok.config.dc_num_shards, (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(ok.config.fract_base_dir, "42");
}

// ---- paths and YAML output ------------------------------------------------------------------

TEST_F(ConfigTest, PathKeysBecomeAbsolute) {
  const std::string path =
      write("a.yml", "base_run_dir: runs/./x/\ndataset_dir: /abs/data/../sets\njob_name: j\n");
  const LoadedConfig loaded = load({path}, {}, /*resolve_paths=*/true);
  EXPECT_EQ(loaded.config.base_run_dir, (fs::current_path() / "runs" / "x").string());
  EXPECT_EQ(loaded.config.dataset_dir, "/abs/sets");
  EXPECT_EQ(loaded.config.fract_base_dir, (fs::current_path() / "fractals").string());
  EXPECT_EQ(loaded.config.checkpoint_dir, "checkpoints");  // a subdirectory of the run dir
  EXPECT_EQ(loaded.config.job_name, "j");
}

TEST_F(ConfigTest, ToYamlRoundTripsEveryKeyExactly) {
  const Config original = non_default_config();
  const std::string text = to_yaml(original);
  expect_same(config_from_yaml_text(text, "broadcast"), original);

  // The same text as a file: load_config reads it back too, with every key from that file.
  const std::string path = write("config.yaml", text);
  const LoadedConfig loaded = load({path});
  expect_same(loaded.config, original);
  for (const auto& [key, origin] : loaded.origin) EXPECT_EQ(origin, path) << key;
}

TEST_F(ConfigTest, ToYamlFormat) {
  Config c;
  c.variance_threshold = 0.1 + 0.2;
  c.min_learning_rate = 1e-05;
  const std::string text = to_yaml(c);
  EXPECT_EQ(text.rfind("# ", 0), 0u);
  for (const char* line :
       {"\nvariance_threshold: 0.30000000000000004\n", "\nmin_learning_rate: 1.0e-05\n",
        "\nval_split: 30.0\n", "\nnormalize: 1.0\n", "\ntorch_amp: 1\n", "\ndisable_scheduler: 0\n",
        "\nasync_save: false\n", "\ndc_num_shards: [1, 1, 1]\n", "\ndc_shard_dims: [2, 3, 4]\n",
        "\noptimizer: ADAM\n", "\nepochs: -1\n", "\nseed: 42\n"})
    EXPECT_CONTAINS(text, line);
  // Every key once, in schema order.
  std::vector<std::string> keys;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') keys.push_back(line.substr(0, line.find(':')));
  EXPECT_EQ(keys, known_keys<Config>());
}

TEST_F(ConfigTest, YamlTextErrorsNameSource) {
  try {
    config_from_yaml_text("seed: -5\n", "rank0-broadcast");
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_CONTAINS(e.what(), "rank0-broadcast:1: seed = -5");
  }
}

}  // namespace
}  // namespace scaffold::config
