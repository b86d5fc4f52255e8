// Tests for LlmTrainingConfig: CARAML's defaults (written here from docs/llm.md and
// docs/config.md, not read from the code), the shipped configs (every key once, in order, one
// comment each), the presets and explicit dimensions overriding them, the range checks and cross
// checks, and that docs/config.md names every key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "workloads/llm_training/options.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;
using LC = LlmTrainingConfig;

const std::vector<std::string> kKeys = {"base_run_dir",
                                        "job_name",
                                        "checkpoint_dir",
                                        "seed",
                                        "model_size",
                                        "num_layers",
                                        "hidden_size",
                                        "num_attention_heads",
                                        "ffn_hidden_size",
                                        "seq_length",
                                        "vocab_size",
                                        "make_vocab_size_divisible_by",
                                        "position_embedding",
                                        "init_method_std",
                                        "hidden_dropout",
                                        "attention_dropout",
                                        "attention",
                                        "recompute_granularity",
                                        "precision",
                                        "tensor_model_parallel_size",
                                        "sequence_parallel",
                                        "pipeline_model_parallel_size",
                                        "num_layers_per_virtual_pipeline_stage",
                                        "micro_batch_size",
                                        "global_batch_size",
                                        "train_iters",
                                        "exit_duration_in_mins",
                                        "lr",
                                        "min_lr",
                                        "lr_decay_style",
                                        "lr_warmup_samples",
                                        "lr_decay_samples",
                                        "adam_beta1",
                                        "adam_beta2",
                                        "adam_eps",
                                        "weight_decay",
                                        "clip_grad",
                                        "initial_loss_scale",
                                        "min_loss_scale",
                                        "loss_scale_window",
                                        "hysteresis",
                                        "use_distributed_optimizer",
                                        "optimizer_kernel",
                                        "gemm_kernel",
                                        "gelu_kernel",
                                        "loss_kernel",
                                        "log_interval",
                                        "timing_warmup_iters",
                                        "eval_interval",
                                        "eval_iters",
                                        "save_interval",
                                        "data_path",
                                        "split",
                                        "vocab_file",
                                        "merge_file",
                                        "tokenizer_type",
                                        "synthetic_train_samples",
                                        "synthetic_valid_samples",
                                        "dataloader_num_workers",
                                        "device",
                                        "device_sharing",
                                        "progress_timeout_s"};

class LlmTrainingConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("scaffold_test_llm_config_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& text) const {
    const fs::path path = dir_ / "cfg.yml";
    std::ofstream(path) << text;
    return path.string();
  }
  static LoadedConfigT<LC> load(const std::vector<std::string>& files) {
    LoadRequest request;
    request.config_files = files;
    request.resolve_paths = false;
    return load_config_as<LC>(request);
  }
  std::string load_error(const std::string& text) const {
    try {
      load({write(text)});
    } catch (const core::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted:\n" << text;
    return "";
  }
  fs::path dir_;
};

void expect_caraml_defaults(const LC& c) {
  EXPECT_EQ(c.model_size, "800M");
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.global_batch_size, 512);
  EXPECT_EQ(c.tensor_model_parallel_size, 1);
  // CARAML passes --sequence-parallel, which Megatron turns off at TP 1: off in effect.
  EXPECT_FALSE(c.sequence_parallel);
  EXPECT_EQ(c.pipeline_model_parallel_size, 1);
  EXPECT_EQ(c.num_layers_per_virtual_pipeline_stage, 0);
  EXPECT_EQ(c.precision, "fp16");
  EXPECT_EQ(c.position_embedding, "rope");
  EXPECT_EQ(c.recompute_granularity, "selective");
  EXPECT_DOUBLE_EQ(c.init_method_std, 0.0048);
  EXPECT_DOUBLE_EQ(c.lr, 1e-4);
  EXPECT_DOUBLE_EQ(c.min_lr, 1e-5);
  EXPECT_EQ(c.lr_decay_style, "cosine");
  EXPECT_EQ(c.lr_warmup_samples, 216320);
  EXPECT_EQ(c.lr_decay_samples, 128953125);
  EXPECT_DOUBLE_EQ(c.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.adam_beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.adam_eps, 1e-8);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(c.clip_grad, 1.0);
  // CARAML's --initial-loss-scale 4096 --min-loss-scale 1.0 --loss-scale-window 500 --hysteresis 2.
  EXPECT_DOUBLE_EQ(c.initial_loss_scale, 4096);
  EXPECT_DOUBLE_EQ(c.min_loss_scale, 1.0);
  EXPECT_EQ(c.loss_scale_window, 500);
  EXPECT_EQ(c.hysteresis, 2);
  // CARAML passes --use-distributed-optimizer; off by default here (docs/llm.md).
  EXPECT_FALSE(c.use_distributed_optimizer);
  // AdamW's one-pass update on a CPU, LibTorch's operations elsewhere.
  EXPECT_EQ(c.optimizer_kernel, "auto");
  // The linear layers' products: LibTorch's unless asked (a probe's verdict is per process).
  EXPECT_EQ(c.gemm_kernel, "auto");
  // The MLP's GELU: the native kernel on a CPU.
  EXPECT_EQ(c.gelu_kernel, "auto");
  // The output layer's loss: the one-node kernel on a CPU.
  EXPECT_EQ(c.loss_kernel, "auto");
  EXPECT_EQ(c.log_interval, 5);
  EXPECT_EQ(c.eval_interval, 2000);
  EXPECT_EQ(c.eval_iters, 15);
  EXPECT_DOUBLE_EQ(c.exit_duration_in_mins, 30);
  EXPECT_EQ(c.split, "7,3,1");
  EXPECT_EQ(c.vocab_size, 50257);
  const GptDims d = resolve_gpt_dims(c);
  EXPECT_EQ(d.num_layers, 16);
  EXPECT_EQ(d.hidden_size, 2048);
  EXPECT_EQ(d.num_attention_heads, 8);
  EXPECT_EQ(d.ffn_hidden_size, 8192);
  EXPECT_EQ(d.seq_length, 2048);
}

TEST_F(LlmTrainingConfigTest, DefaultsAreCaramls800M) {
  expect_caraml_defaults(LC{});
  EXPECT_EQ(known_keys<LC>(), kKeys);
}

TEST_F(LlmTrainingConfigTest, ShippedDefaultFileHasEveryKeyInOrder) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/configs/llm_training.yml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::vector<std::string> keys;
  const std::regex key_line(R"(^([A-Za-z_0-9]+):)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, key_line)) keys.push_back(m[1]);
    if (!line.empty() && line[0] != '#') {
      EXPECT_NE(line.find(" # "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(keys, kKeys);
  const auto loaded = load({path});
  expect_caraml_defaults(loaded.config);
  EXPECT_TRUE(loaded.warnings.empty());
}

TEST_F(LlmTrainingConfigTest, QuickstartLoadsTheTinyPreset) {
  const auto loaded =
      load({std::string(SCAFFOLD_SOURCE_DIR) + "/configs/llm_training_quickstart.yml"});
  const LC& c = loaded.config;
  EXPECT_EQ(c.model_size, "tiny");
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_EQ(c.global_batch_size % c.micro_batch_size, 0);
  const GptDims d = resolve_gpt_dims(c);
  EXPECT_EQ(d.num_layers, 4);
  EXPECT_EQ(d.hidden_size, 128);
  EXPECT_EQ(d.seq_length, 128);
}

TEST_F(LlmTrainingConfigTest, PresetsAndExplicitDimensionsOverridingThem) {
  LC c;
  c.model_size = "13B";
  GptDims d = resolve_gpt_dims(c);
  EXPECT_EQ(d.num_layers, 40);
  EXPECT_EQ(d.hidden_size, 5120);
  EXPECT_EQ(d.num_attention_heads, 32);
  EXPECT_EQ(d.ffn_hidden_size, 20480);
  c.model_size = "175B";
  d = resolve_gpt_dims(c);
  EXPECT_EQ(d.num_layers, 96);
  EXPECT_EQ(d.hidden_size, 12288);
  EXPECT_EQ(d.num_attention_heads, 96);
  EXPECT_EQ(d.ffn_hidden_size, 4 * 12288);
  c.model_size = "117M";
  d = resolve_gpt_dims(c);
  EXPECT_EQ(d.hidden_size, 768);
  EXPECT_EQ(d.seq_length, 1024);
  // Explicit keys win; an explicit hidden size without an FFN size keeps 4 x hidden.
  c.model_size = "13B";
  c.num_layers = 2;
  c.hidden_size = 256;
  c.seq_length = 64;
  d = resolve_gpt_dims(c);
  EXPECT_EQ(d.num_layers, 2);
  EXPECT_EQ(d.hidden_size, 256);
  EXPECT_EQ(d.num_attention_heads, 32);
  EXPECT_EQ(d.ffn_hidden_size, 1024);
  EXPECT_EQ(d.seq_length, 64);
  c.ffn_hidden_size = 300;
  EXPECT_EQ(resolve_gpt_dims(c).ffn_hidden_size, 300);
}

TEST_F(LlmTrainingConfigTest, BadValuesNameTheKeyValueAndWhatIsAllowed) {
  struct Case {
    const char* text;
    const char* key;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"model_size: 7B\n", "model_size", "one of tiny, 117M, 800M, 13B, 175B"},
      {"num_layers: -1\n", "num_layers", "an integer >= 0 (0: the model_size preset's)"},
      {"vocab_size: 1\n", "vocab_size", "an integer >= 2"},
      {"position_embedding: alibi\n", "position_embedding", "one of learned, rope"},
      {"recompute_granularity: some\n", "recompute_granularity", "one of none, selective, full"},
      {"precision: tf32\n", "precision", "one of fp32, bf16, fp16"},
      {"pipeline_model_parallel_size: 0\n", "pipeline_model_parallel_size", ">= 1"},
      {"num_layers_per_virtual_pipeline_stage: -1\n", "num_layers_per_virtual_pipeline_stage",
       ">= 0"},
      {"micro_batch_size: 0\n", "micro_batch_size", "an integer >= 1"},
      {"hidden_dropout: 1\n", "hidden_dropout", "a number in [0, 1)"},
      {"lr: 0\n", "lr", "a number > 0"},
      {"lr_decay_style: step\n", "lr_decay_style", "one of cosine, linear, constant"},
      {"optimizer_kernel: adam\n", "optimizer_kernel", "one of auto, fused, libtorch"},
      {"gemm_kernel: mkl\n", "gemm_kernel", "one of auto, probe, onednn, libtorch"},
      {"gelu_kernel: fast\n", "gelu_kernel", "one of auto, native, libtorch"},
      {"loss_kernel: liger\n", "loss_kernel", "one of auto, native, libtorch"},
      {"exit_duration_in_mins: -1\n", "exit_duration_in_mins", "a number >= 0"},
      // The split is checked with synthetic data too (a typo found before data_path is set).
      {"split: 90,10,x\n", "split", "numbers >= 0 separated by ',' or '/'"},
      {"split: 0/0\n", "split", "one of them > 0"},
      {"split: 7,-3,1\n", "split", "numbers >= 0"},
      // Cross checks.
      {"hidden_size: 100\n", "hidden_size", "a multiple of the attention heads (8)"},
      {"global_batch_size: 10\nmicro_batch_size: 4\n", "global_batch_size",
       "a multiple of micro_batch_size (4)"},
      {"min_lr: 0.001\n", "min_lr", "a number <= lr"},
      {"min_loss_scale: 8192\n", "min_loss_scale", "a number <= initial_loss_scale (4096)"},
      {"initial_loss_scale: 0\n", "initial_loss_scale", "a number > 0"},
      {"min_loss_scale: 0\n", "min_loss_scale", "a number > 0"},
      {"loss_scale_window: 0\n", "loss_scale_window", "an integer >= 1"},
      {"hysteresis: 0\n", "hysteresis", "an integer >= 1"},
      {"lr_warmup_samples: 100\nlr_decay_samples: 50\n", "lr_decay_samples",
       "more than lr_warmup_samples (100)"},
      {"timing_warmup_iters: 7\n", "timing_warmup_iters", "a multiple of log_interval (5)"},
      {"eval_interval: 12\n", "eval_interval", "a multiple of log_interval (5)"},
      {"save_interval: 3\n", "save_interval", "a multiple of log_interval (5)"},
  };
  for (const Case& c : cases) {
    const std::string message = load_error(c.text);
    EXPECT_NE(message.find(c.key), std::string::npos) << c.text << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.text << message;
  }
}

TEST_F(LlmTrainingConfigTest, DocsNameEveryKey) {
  const std::string path = std::string(SCAFFOLD_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t section = text.find("## LLM training");
  ASSERT_NE(section, std::string::npos);
  const std::string tail = text.substr(section);
  for (const std::string& key : kKeys)
    EXPECT_NE(tail.find("| `" + key + "` |"), std::string::npos) << key;
}

}  // namespace
}  // namespace scaffold::config
