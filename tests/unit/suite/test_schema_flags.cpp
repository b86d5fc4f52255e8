// Tests for the command-line flags generated from a config schema (suite/command_line.cpp): every
// flag that `scaffold benchmark`, `generate_dataset` and `generate_fractals` declared by hand is
// generated with the same name, key and value type; every key of each schema gets one; parsed
// flags load through the config loader (an explicit flag wins even at the default; a repeated
// flag keeps its last value); and load_config_everywhere_as hands every rank the same struct.
#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "suite/command_line.hpp"
#include "workloads/image_classification/options.hpp"
#include "workloads/scaffold/schema.hpp"

namespace scaffold::cli {
namespace {

namespace fs = std::filesystem;
using config::Config;
using config::ImageClassificationConfig;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing: " << (needle)

// What a hand-written override declared: flag, key and the FlagValue alternative it produced.
enum class Typed { kInt, kFloat, kString, kIntList };
struct HandFlag {
  const char* flag;
  const char* key;
  Typed type;
};

// Every add_*_override call in src/cli/benchmark.cpp, generate_dataset.cpp and
// generate_fractals.cpp before the flags were generated (their names must not change:
// restart.sh files and job scripts use them).
const std::vector<HandFlag> kHandWrittenFlags = {
    {"--base-run-dir", "base_run_dir", Typed::kString},
    {"--job-name", "job_name", Typed::kString},
    {"--fract-base-dir", "fract_base_dir", Typed::kString},
    {"--dataset-dir", "dataset_dir", Typed::kString},
    {"--n-categories", "n_categories", Typed::kInt},
    {"--n-instances-used-per-fractal", "n_instances_used_per_fractal", Typed::kInt},
    {"--problem-scale", "problem_scale", Typed::kInt},
    {"--unet-bottleneck-dim", "unet_bottleneck_dim", Typed::kInt},
    {"--unet-base-channels", "unet_base_channels", Typed::kInt},
    {"--seed", "seed", Typed::kInt},
    {"--local-batch-size", "local_batch_size", Typed::kInt},
    {"--warmup-batches", "warmup_batches", Typed::kInt},
    {"--group-norm-groups", "group_norm_groups", Typed::kInt},
    {"--dataloader-num-workers", "dataloader_num_workers", Typed::kInt},
    {"--optimizer", "optimizer", Typed::kString},
    {"--device", "device", Typed::kString},
    {"--dc-num-shards", "dc_num_shards", Typed::kIntList},
    {"--dc-shard-dims", "dc_shard_dims", Typed::kIntList},
    {"--dc-groupnorm", "dc_groupnorm", Typed::kString},
    {"--progress-timeout-s", "progress_timeout_s", Typed::kInt},
    {"--epochs", "epochs", Typed::kInt},
    {"--starting-learning-rate", "starting_learning_rate", Typed::kFloat},
    {"--min-learning-rate", "min_learning_rate", Typed::kFloat},
    {"--T-0", "T_0", Typed::kInt},
    {"--T-mult", "T_mult", Typed::kInt},
    {"--checkpoint-interval", "checkpoint_interval", Typed::kInt},
    {"--datagen-batch-size", "datagen_batch_size", Typed::kInt},  // generate_* only
};

// A subcommand with the flags of C's schema, parsed from `args`.
template <class C>
struct Parsed {
  CLI::App app;
  CLI::App* sub = nullptr;
  ConfigArgs config;

  explicit Parsed(const std::vector<std::string>& skip = {}) {
    sub = app.add_subcommand("run", "");
    add_schema_flags<C>(sub, &config, skip);
  }
  void parse(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
    app.parse(args);
  }
  std::map<std::string, config::FlagOverride> flags() const {
    std::map<std::string, config::FlagOverride> out;
    for (config::FlagOverride& f : config.given_flags()) out.emplace(f.key, std::move(f));
    return out;
  }
};

TEST(SchemaFlags, FlagNamesFromKeys) {
  EXPECT_EQ(schema_flag_name("problem_scale"), "--problem-scale");
  EXPECT_EQ(schema_flag_name("T_0"), "--T-0");
  EXPECT_EQ(schema_flag_name("seed"), "--seed");
  EXPECT_EQ(schema_flag_name("n_instances_used_per_fractal"), "--n-instances-used-per-fractal");
}

TEST(SchemaFlags, EveryHandWrittenFlagIsGeneratedForTheSameKeyAndType) {
  Parsed<Config> p;
  std::vector<std::string> args;
  for (const HandFlag& h : kHandWrittenFlags) {
    ASSERT_NE(p.sub->get_option_no_throw(h.flag), nullptr) << h.flag;
    args.push_back(h.flag);
    switch (h.type) {
      case Typed::kInt:
        args.push_back("3");
        break;
      case Typed::kFloat:
        args.push_back("0.5");
        break;
      case Typed::kString:
        args.push_back("x");
        break;
      case Typed::kIntList:
        for (const char* v : {"2", "3", "4"}) args.push_back(v);
        break;
    }
  }
  p.parse(args);
  const auto flags = p.flags();
  EXPECT_EQ(flags.size(), kHandWrittenFlags.size());
  for (const HandFlag& h : kHandWrittenFlags) {
    SCOPED_TRACE(h.flag);
    ASSERT_EQ(flags.count(h.key), 1u);
    const config::FlagOverride& f = flags.at(h.key);
    EXPECT_EQ(f.flag, h.flag);  // named so in error messages and LoadedConfig::origin
    // The same FlagValue alternative as before, so overrides.yaml is written alike.
    switch (h.type) {
      case Typed::kInt:
        EXPECT_EQ(std::get<int64_t>(f.value), 3);
        break;
      case Typed::kFloat:
        EXPECT_EQ(std::get<double>(f.value), 0.5);
        break;
      case Typed::kString:
        EXPECT_EQ(std::get<std::string>(f.value), "x");
        break;
      case Typed::kIntList:
        EXPECT_EQ(std::get<std::vector<int64_t>>(f.value), (std::vector<int64_t>{2, 3, 4}));
        break;
    }
  }
}

template <class C>
void expect_one_flag_per_key(const std::vector<std::string>& extra_options) {
  Parsed<C> p;
  const auto& keys = config::schema_of<C>();
  for (const auto& key : keys) {
    SCOPED_TRACE(key.name);
    const CLI::Option* opt = p.sub->get_option_no_throw(schema_flag_name(key.name));
    ASSERT_NE(opt, nullptr);
    EXPECT_EQ(opt->get_description(), key.help + " (" + key.allowed + ")");
  }
  // Nothing else: the subcommand has its --help and the keys' flags.
  EXPECT_EQ(p.sub->get_options().size(), keys.size() + extra_options.size());
  for (const std::string& name : extra_options)
    EXPECT_NE(p.sub->get_option_no_throw(name), nullptr) << name;
}

TEST(SchemaFlags, EveryKeyOfEverySchemaGetsOneFlagWithTheSchemasHelp) {
  expect_one_flag_per_key<Config>({"--help"});
  expect_one_flag_per_key<ImageClassificationConfig>({"--help"});
}

TEST(SchemaFlags, SkippedKeysGetNoFlagAndUnknownSkipsThrow) {
  Parsed<Config> p({"framework", "dist"});
  EXPECT_EQ(p.sub->get_option_no_throw("--framework"), nullptr);
  EXPECT_EQ(p.sub->get_option_no_throw("--dist"), nullptr);
  EXPECT_NE(p.sub->get_option_no_throw("--seed"), nullptr);
  CLI::App app;
  ConfigArgs args;
  EXPECT_THROW(add_schema_flags<Config>(&app, &args, {"problem_scal"}), std::invalid_argument);
}

// ---- parsed flags through the loader -----------------------------------------------------------

class SchemaFlagsLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("scaffold_test_schema_flags_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(counter++));
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
  template <class C>
  static config::LoadedConfigT<C> load(const Parsed<C>& p, std::vector<std::string> files = {}) {
    config::LoadRequest request;
    request.config_files = std::move(files);
    request.flags = p.config.given_flags();
    request.resolve_paths = false;
    return config::load_config_as<C>(request);
  }
  fs::path dir_;
};

TEST_F(SchemaFlagsLoad, ExplicitFlagWinsEvenAtTheDefaultAndRepeatsKeepTheLast) {
  const std::string file = write("a.yml", "seed: 7\noptimizer: SGD\nepochs: 4\n");
  Parsed<Config> p;
  p.parse({"--seed", "42", "--optimizer", "adam", "--epochs", "3", "--epochs", "5", "--T-0", "4",
           "--starting-learning-rate", "1e-2", "--dc-num-shards", "2", "1", "1"});
  const config::LoadedConfig loaded = load(p, {file});
  EXPECT_EQ(loaded.config.seed, 42);
  EXPECT_EQ(loaded.origin.at("seed"), "--seed");
  EXPECT_EQ(loaded.config.optimizer, "ADAM");
  EXPECT_EQ(loaded.config.epochs, 5);
  EXPECT_EQ(loaded.config.T_0, 4);
  EXPECT_EQ(loaded.config.starting_learning_rate, 0.01);
  EXPECT_EQ(loaded.config.dc_num_shards, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(loaded.origin.at("problem_scale"), "default");
}

TEST_F(SchemaFlagsLoad, BoolFlagsTakeZeroOneTrueFalse) {
  Parsed<Config> p;
  p.parse({"--torch-amp", "0", "--async-save", "true", "--more-determinism", "1",
           "--train-from-scratch", "False"});
  const Config c = load(p).config;
  EXPECT_FALSE(c.torch_amp);
  EXPECT_TRUE(c.async_save);
  EXPECT_TRUE(c.more_determinism);
  EXPECT_FALSE(c.train_from_scratch);

  Parsed<ImageClassificationConfig> ic;
  ic.parse({"--channels-last", "0", "--synthetic-separable", "true"});
  const ImageClassificationConfig icc = load(ic).config;
  EXPECT_FALSE(icc.channels_last);
  EXPECT_TRUE(icc.synthetic_separable);
}

TEST_F(SchemaFlagsLoad, BadFlagValuesAreTheLoadersProblemsNamingTheFlag) {
  Parsed<ImageClassificationConfig> p;
  p.parse({"--channels-last", "yes", "--image-size", "16", "--precision", "fp8", "--model",
           "resnet18"});
  try {
    load(p);
    FAIL() << "no error";
  } catch (const core::Error& e) {
    const std::string message = e.what();
    EXPECT_CONTAINS(message,
                    "  --channels-last: channels_last = yes: expected 0, 1, true or false");
    EXPECT_CONTAINS(message, "  --image-size: image_size = 16: expected an integer in [32, 1024]");
    EXPECT_CONTAINS(message,
                    "  --precision: precision = fp8: expected one of fp32, bf16, tf32, fp16");
  }
}

TEST_F(SchemaFlagsLoad, ListFlagsTakeAsManyValuesAsTheKeyAllows) {
  {
    Parsed<Config> p;
    p.parse({"--dc-num-shards", "2", "--dc-shard-dims", "4"});
    const Config c = load(p).config;
    EXPECT_EQ(c.dc_num_shards, (std::vector<int>{2}));
    EXPECT_EQ(c.dc_shard_dims, (std::vector<int>{4}));
  }
  {
    Parsed<Config> p;
    EXPECT_THROW(p.parse({"--dc-num-shards", "1", "1", "1", "1"}), CLI::ParseError);
  }
}

// Number flags are taken as text and judged by the loader's rules, as the same text in a YAML
// file (issue 16): CLI11 read 99999999999999999999 as the largest int64 and reported
// "epochs = 9223372036854775807", a value never typed, and refused 1e20 or 3.5 with "Could not
// convert" and no key.
TEST_F(SchemaFlagsLoad, NumberFlagsAreJudgedAsTypedLikeAFilesValues) {
  Parsed<Config> p;
  p.parse({"--epochs", "99999999999999999999", "--seed", "abc", "--T-0", "-99999999999999999999",
           "--T-mult", "4294967300", "--warmup-batches", "1e20", "--starting-learning-rate",
           "1e400", "--dc-num-shards", "2", "0x10", "--n-categories", "0x10"});
  try {
    load(p);
    FAIL() << "no error";
  } catch (const core::Error& e) {
    const std::string message = e.what();
    EXPECT_CONTAINS(message, "  --epochs: epochs = 99999999999999999999: expected");
    EXPECT_CONTAINS(
        message,
        "99999999999999999999: expected -1 (until target_dice) or an integer >= 1 (beyond the "
        "64-bit integer range)");
    EXPECT_CONTAINS(message, "  --seed: seed = abc: expected an integer >= 0 (got a string)");
    EXPECT_CONTAINS(
        message,
        "  --T-0: T_0 = -99999999999999999999: expected an integer >= 1 (beyond the 64-bit");
    EXPECT_CONTAINS(
        message,
        "  --T-mult: T_mult = 4294967300: expected an integer >= 1 (beyond the 32-bit integer "
        "range of this key)");
    EXPECT_CONTAINS(message, "  --warmup-batches: warmup_batches = 1e20: expected");
    EXPECT_CONTAINS(message, "(got a non-integer number)");
    EXPECT_CONTAINS(
        message,
        "  --starting-learning-rate: starting_learning_rate = 1e400: expected a number > 0 (got "
        "a non-finite number)");
    EXPECT_CONTAINS(message, "  --dc-num-shards: dc_num_shards = [2, 0x10]: expected");
    EXPECT_CONTAINS(message, "(entry 2, 0x10, is not an integer)");
    EXPECT_CONTAINS(
        message, "  --n-categories: n_categories = 0x10: expected an integer >= 1 (got a string)");
    EXPECT_EQ(message.find("9223372036854775807"), std::string::npos)
        << message;  // never the clamped value
  }
  // Plain values still arrive typed; problem_scale's non-integer is floored as in a file.
  Parsed<Config> ok;
  ok.parse({"--problem-scale", "5.7", "--seed", "+7", "--val-split", "25", "--min-learning-rate",
            "-0.5e-3"});
  const auto flags = ok.flags();
  EXPECT_EQ(std::get<config::FlagText>(flags.at("problem_scale").value),
            (config::FlagText{{"5.7"}, false}));
  EXPECT_EQ(std::get<int64_t>(flags.at("seed").value), 7);
  EXPECT_EQ(std::get<double>(flags.at("val_split").value), 25.0);
  EXPECT_EQ(std::get<double>(flags.at("min_learning_rate").value), -0.5e-3);
  config::LoadRequest request;
  request.flags = {flags.at("problem_scale"), flags.at("seed")};
  request.resolve_paths = false;
  const config::LoadedConfig loaded = config::load_config_as<Config>(request);
  EXPECT_EQ(loaded.config.problem_scale, 5);
  EXPECT_EQ(loaded.config.seed, 7);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_CONTAINS(loaded.warnings[0], "floored to 5");
}

// ---- loading on every rank -------------------------------------------------------------------

// A world of two played one rank at a time: rank 0 records what it broadcasts, and a rank-1
// communicator replays it, so the receiving side's parse is exercised too.
class ReplayComm : public dist::Communicator {
 public:
  ReplayComm(int rank, std::vector<std::string>* log) : rank_(rank), log_(log) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void barrier() override {}
  void broadcast(std::string& bytes, int root) override {
    EXPECT_EQ(root, 0);
    if (rank_ == 0) {
      log_->push_back(bytes);
    } else {
      ASSERT_LT(next_, log_->size());
      bytes = (*log_)[next_++];
    }
  }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine, mine}; }
  void allreduce_sum(int64_t*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_max(double*, std::size_t) override {}
  int local_rank() const override { return rank_; }
  int local_size() const override { return 2; }
  int nodes() const override { return 1; }
  [[noreturn]] void abort(int) override { std::abort(); }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  void broadcast(void*, std::size_t, int) override {}
  std::unique_ptr<dist::Request> iallreduce_sum(void*, std::size_t, dist::DataType) override {
    return nullptr;
  }
  std::unique_ptr<dist::Request> isend(const void*, std::size_t, int, int) override {
    return nullptr;
  }
  std::unique_ptr<dist::Request> irecv(void*, std::size_t, int, int) override { return nullptr; }
  bool device_buffers() const override { return false; }

 private:
  int rank_;
  std::vector<std::string>* log_;
  std::size_t next_ = 0;
};

TEST_F(SchemaFlagsLoad, EveryRankGetsRankZerosStruct) {
  const std::string file = write("ic.yml", "model: resnet18\nlearning_rate: 0.3\n");
  Parsed<ImageClassificationConfig> p;
  p.config.files = {file};
  p.parse({"--epochs", "2", "--time-budget-s", "12.5"});
  std::vector<std::string> log;
  ReplayComm rank0(0, &log), rank1(1, &log);
  const ImageClassificationConfig a =
      load_config_everywhere_as<ImageClassificationConfig>(rank0, p.config);
  // Rank 1 loads its own command line (the same one) and takes rank 0's struct.
  const ImageClassificationConfig b =
      load_config_everywhere_as<ImageClassificationConfig>(rank1, p.config);
  for (const ImageClassificationConfig* c : {&a, &b}) {
    EXPECT_EQ(c->model, "resnet18");
    EXPECT_EQ(c->learning_rate, 0.3);
    EXPECT_EQ(c->epochs, 2);
    EXPECT_EQ(c->time_budget_s, 12.5);
    EXPECT_TRUE(fs::path(c->base_run_dir).is_absolute()) << c->base_run_dir;  // resolved once
  }
  EXPECT_EQ(config::to_yaml(a), config::to_yaml(b));

  // A rank given another command line (here none: the defaults) is refused, naming the rank and
  // the first line that differs, instead of silently running rank 0's configuration.
  std::vector<std::string> log3;
  ReplayComm again0(0, &log3), again1(1, &log3);
  (void)load_config_everywhere_as<ImageClassificationConfig>(again0, p.config);
  std::string refused;
  try {
    (void)load_config_everywhere_as<ImageClassificationConfig>(again1, ConfigArgs{});
  } catch (const dist::AgreedError& e) {
    refused = e.what();
  }
  EXPECT_CONTAINS(refused, "rank 1's configuration differs from rank 0's");
  EXPECT_CONTAINS(refused, "(rank 0: 'model: resnet18')");

  // Config through the old name, too.
  std::vector<std::string> log2;
  ReplayComm r0(0, &log2), r1(1, &log2);
  ConfigArgs args;
  EXPECT_EQ(load_config_everywhere_as<config::Config>(r0, args).problem_scale, 7);
  EXPECT_EQ(load_config_everywhere_as<Config>(r1, args).problem_scale, 7);
}

TEST_F(SchemaFlagsLoad, ARankZeroErrorIsEveryRanksError) {
  const std::string file = write("bad.yml", "image_size: 8\n");
  ConfigArgs args;
  args.files = {file};
  std::vector<std::string> log;
  ReplayComm rank0(0, &log), rank1(1, &log);
  std::string e0, e1;
  try {
    load_config_everywhere_as<ImageClassificationConfig>(rank0, args);
  } catch (const dist::AgreedError& e) {
    e0 = e.what();
  }
  try {
    load_config_everywhere_as<ImageClassificationConfig>(rank1, ConfigArgs{});
  } catch (const dist::AgreedError& e) {
    e1 = e.what();
  }
  EXPECT_CONTAINS(e0, file + ":1: image_size = 8");
  EXPECT_EQ(e0, e1);
}

// --threads is bounded (issue 16, item 4): 100000 used to be accepted and hung the run; the
// message names the flag, the value and the bound in a few words, not the 309 digits of the
// largest double that CLI::PositiveNumber printed.
TEST(ThreadsFlag, BoundedWithAShortMessage) {
  for (const char* bad : {"100000", "1025", "0", "-2", "two", "1.5"}) {
    CLI::App app;
    int threads = 0;
    add_threads_option(&app, &threads);
    const char* argv[] = {"scaffold", "--threads", bad};
    try {
      app.parse(3, const_cast<char**>(argv));
      ADD_FAILURE() << "--threads " << bad << " accepted as " << threads;
    } catch (const CLI::ParseError& e) {
      const std::string message = e.what();
      EXPECT_CONTAINS(message, std::string("--threads: ") + bad + ": expected");
      EXPECT_CONTAINS(message, "1 to 1024");
      EXPECT_LT(message.size(), 300u) << message;
    }
  }
  for (const char* good : {"1", "7", "1024"}) {
    CLI::App app;
    int threads = 0;
    add_threads_option(&app, &threads);
    const char* argv[] = {"scaffold", "--threads", good};
    app.parse(3, const_cast<char**>(argv));
    EXPECT_EQ(threads, std::atoi(good));
  }
}

}  // namespace
}  // namespace scaffold::cli
