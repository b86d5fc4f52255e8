// LlmTrainingConfig's schema table: every key with its kind, help, allowed values and range
// checks, in llm_training_options.hpp order, plus the cross checks that need no rank count (a
// head count dividing the hidden size after the preset, intervals that are whole log intervals,
// the micro-batch dividing the global batch). Also resolve_gpt_dims. No renamed keys: this
// struct has no older format to stay compatible with.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "core/error.hpp"
#include "workloads/llm_training/options.hpp"

namespace scaffold::config {

GptDims resolve_gpt_dims(const LlmTrainingConfig& c) {
  const GptPreset* preset = nullptr;
  for (const GptPreset& p : gpt_presets())
    if (c.model_size == p.name) preset = &p;
  if (preset == nullptr)
    throw core::Error(fmt::format("model_size: '{}' is not a preset", c.model_size));
  GptDims d;
  d.num_layers = c.num_layers > 0 ? c.num_layers : preset->num_layers;
  d.hidden_size = c.hidden_size > 0 ? c.hidden_size : preset->hidden_size;
  d.num_attention_heads =
      c.num_attention_heads > 0 ? c.num_attention_heads : preset->num_attention_heads;
  d.seq_length = c.seq_length > 0 ? c.seq_length : preset->seq_length;
  // An explicit hidden size without an explicit FFN size keeps Megatron's 4 x hidden.
  if (c.ffn_hidden_size > 0)
    d.ffn_hidden_size = c.ffn_hidden_size;
  else if (preset->ffn_hidden_size > 0 && c.hidden_size <= 0)
    d.ffn_hidden_size = preset->ffn_hidden_size;
  else
    d.ffn_hidden_size = 4 * d.hidden_size;
  return d;
}

namespace {

using LC = LlmTrainingConfig;
using Spec = KeySpecT<LC>;
using rules::at_least_0;
using rules::bind_key;
using rules::bind_path;
using rules::non_empty;

bool int64_at_least_0(const int64_t& v) {
  return v >= 0;
}
bool int64_at_least_1(const int64_t& v) {
  return v >= 1;
}
bool number_at_least_0(const double& v) {
  return v >= 0.0;
}
bool number_above_0(const double& v) {
  return v > 0.0;
}
bool probability(const double& v) {
  return v >= 0.0 && v < 1.0;
}

// Megatron's split string: weights separated by ',' (or '/'), each a number >= 0, one of them
// positive ("969,30,1", "7/3/1", "1"). Checked here even when the data is synthetic, so a typo
// is found before a run that later switches to data_path.
bool split_weights_ok(const std::string& split) {
  const char sep = split.find(',') != std::string::npos ? ',' : '/';
  double sum = 0.0;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(split.find(sep, begin), split.size());
    const std::string part = split.substr(begin, end - begin);
    char* stop = nullptr;
    const double w = std::strtod(part.c_str(), &stop);
    if (stop == part.c_str() || std::string(stop).find_first_not_of(" \t") != std::string::npos ||
        !std::isfinite(w) || w < 0.0)
      return false;
    sum += w;
    if (end == split.size()) return sum > 0.0;
    begin = end + 1;
  }
}

std::string preset_names() {
  std::string s;
  for (const GptPreset& p : gpt_presets()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::vector<std::string> preset_list() {
  std::vector<std::string> v;
  for (const GptPreset& p : gpt_presets()) v.emplace_back(p.name);
  return v;
}

// "" when `value` is 0 or a multiple of log_interval; else what is expected.
std::string whole_log_intervals(int64_t value, int64_t log_interval, bool zero_ok) {
  if ((zero_ok && value == 0) || (log_interval > 0 && value % log_interval == 0)) return "";
  return fmt::format(
      "a multiple of log_interval ({}){}: the loop reports, validates and saves once per log "
      "interval",
      log_interval, zero_ok ? ", or 0" : "");
}

std::vector<Spec> llm_training_keys() {
  std::vector<Spec> t;
  const auto add = [&t](Spec spec) {
    t.push_back(std::move(spec));
    return t.size() - 1;
  };
  const auto add_choice = [&t](Spec spec, std::vector<std::string> choices) {
    spec.choices = std::move(choices);
    t.push_back(std::move(spec));
    return t.size() - 1;
  };
  const auto dim = [&](const char* name, int64_t LC::*member, const char* help) {
    return add(bind_key(name, member, help, "an integer >= 0 (0: the model_size preset's)",
                        int64_at_least_0));
  };

  // Paths.
  add(rules::base_run_dir_key<LC>());
  add(rules::job_name_key<LC>());
  add(rules::checkpoint_dir_key<LC>());
  add(bind_key("seed", &LC::seed, "the single seed for everything (CARAML: 42)", "an integer >= 0",
               int64_at_least_0));

  // Model.
  add_choice(
      bind_key("model_size", &LC::model_size,
               "GPT size preset: tiny (CPU-sized), 117M (GPT-2 small), 800M, 13B, 175B; each "
               "dimension key > 0 overrides it",
               "one of " + preset_names()),
      preset_list());
  dim("num_layers", &LC::num_layers, "transformer layers (0: the preset's)");
  {
    const auto i = dim("hidden_size", &LC::hidden_size, "hidden size (0: the preset's)");
    t[i].depends_on = {"model_size", "num_attention_heads"};
    t[i].cross_check = [](const LC& c) {
      const GptDims d = resolve_gpt_dims(c);
      return d.hidden_size % d.num_attention_heads == 0
                 ? std::string()
                 : fmt::format(
                       "a multiple of the attention heads ({}): hidden size {} does not split into "
                       "heads",
                       d.num_attention_heads, d.hidden_size);
    };
  }
  dim("num_attention_heads", &LC::num_attention_heads, "attention heads (0: the preset's)");
  dim("ffn_hidden_size", &LC::ffn_hidden_size,
      "MLP hidden size (0: the preset's, else 4 x hidden_size)");
  dim("seq_length", &LC::seq_length,
      "tokens per sequence, also the learned position table's length (0: the preset's)");
  add(bind_key(
      "vocab_size", &LC::vocab_size, "the tokenizer's vocabulary before padding (GPT-2 BPE: 50257)",
      "an integer >= 2", +[](const int64_t& v) { return v >= 2; }));
  add(bind_key(
      "make_vocab_size_divisible_by", &LC::make_vocab_size_divisible_by,
      "the padded vocabulary is a multiple of this x tensor_model_parallel_size (Megatron: 128)",
      "an integer >= 1", int64_at_least_1));
  add_choice(
      bind_key(
          "position_embedding", &LC::position_embedding,
          "learned: a learned absolute position table; rope: rotary embeddings on queries and keys "
          "(CARAML's NVIDIA setup)",
          "one of learned, rope"),
      {"learned", "rope"});
  add(bind_key(
      "init_method_std", &LC::init_method_std,
      "standard deviation of the normal weight initialisation (CARAML 0.0048, Megatron 0.02)",
      "a number > 0", number_above_0));
  add(bind_key("hidden_dropout", &LC::hidden_dropout,
               "dropout after the embeddings, attention and MLP", "a number in [0, 1)",
               probability));
  add(bind_key("attention_dropout", &LC::attention_dropout,
               "dropout on the attention probabilities", "a number in [0, 1)", probability));
  add_choice(
      bind_key("attention", &LC::attention,
               "attention kernel: native (tiled causal attention with an online softmax on the "
               "QKV projection in place, nothing S x S kept; a CPU, no attention dropout, head "
               "size a multiple of 16), fused (LibTorch's "
               "scaled_dot_product_attention), plain (matmul, mask, softmax, matmul); auto: "
               "native where it can run, else fused where LibTorch >= 2.0, else plain",
               "one of auto, native, fused, plain"),
      {"auto", "native", "fused", "plain"});
  add_choice(
      bind_key("recompute_granularity", &LC::recompute_granularity,
               "activation recompute: none; selective (the core attention, CARAML's); full (each "
               "transformer layer)",
               "one of none, selective, full"),
      {"none", "selective", "full"});
  add_choice(bind_key("precision", &LC::precision,
                      "fp32; bf16 autocast; fp16 autocast with dynamic loss scaling (CUDA only)",
                      "one of fp32, bf16, fp16"),
             {"fp32", "bf16", "fp16"});

  // Parallelism.
  add(bind_key("tensor_model_parallel_size", &LC::tensor_model_parallel_size,
               "ranks sharing each layer in Megatron's tensor parallelism (consecutive ranks); the "
               "ranks are this x pipeline_model_parallel_size x the data-parallel size",
               "an integer >= 1", int64_at_least_1));
  add(bind_key("sequence_parallel", &LC::sequence_parallel,
               "1 splits the LayerNorm, dropout and residual regions along the sequence inside the "
               "tensor-parallel group (Megatron's --sequence-parallel): all-gather and "
               "reduce-scatter replace its all-reduces; off at tensor_model_parallel_size 1, as "
               "in Megatron",
               rules::kBoolAllowed, rules::bool_any));
  add(bind_key(
      "pipeline_model_parallel_size", &LC::pipeline_model_parallel_size,
      "pipeline stages (Megatron's --pipeline-model-parallel-size): consecutive tensor-parallel "
      "groups each hold num_layers / this many layers, run by the 1F1B schedule (docs/llm.md)",
      "an integer >= 1", int64_at_least_1));
  add(bind_key(
      "num_layers_per_virtual_pipeline_stage", &LC::num_layers_per_virtual_pipeline_stage,
      "Megatron's --num-layers-per-virtual-pipeline-stage: > 0 interleaves the pipeline "
      "(each rank holds num_layers / (pipeline_model_parallel_size x this) model chunks "
      "of this many layers; the micro-batches per iteration a multiple of the stages); 0: "
      "one contiguous run of layers per stage",
      "an integer >= 0", +[](const int64_t& v) { return v >= 0; }));

  // Batch.
  add(bind_key("micro_batch_size", &LC::micro_batch_size,
               "sequences per rank per forward/backward pass", "an integer >= 1",
               int64_at_least_1));
  {
    const auto i =
        add(bind_key("global_batch_size", &LC::global_batch_size,
                     "sequences per optimizer step over all ranks: micro_batch_size x gradient "
                     "accumulation x data-parallel size",
                     "an integer >= 1", int64_at_least_1));
    t[i].depends_on = {"micro_batch_size"};
    t[i].cross_check = [](const LC& c) {
      return c.global_batch_size % c.micro_batch_size == 0
                 ? std::string()
                 : fmt::format("a multiple of micro_batch_size ({})", c.micro_batch_size);
    };
  }

  // Training length.
  add(bind_key("train_iters", &LC::train_iters, "iterations (optimizer steps) to train",
               "an integer >= 1", int64_at_least_1));
  add(bind_key("exit_duration_in_mins", &LC::exit_duration_in_mins,
               "end the run after the iteration that passes this many minutes since start (CARAML: "
               "30); 0: none",
               "a number >= 0", number_at_least_0));

  // Optimizer and learning rate.
  add(bind_key("lr", &LC::lr, "peak learning rate after the warm-up", "a number > 0",
               number_above_0));
  {
    const auto i = add(bind_key("min_lr", &LC::min_lr, "learning rate at the end of the decay",
                                "a number >= 0", number_at_least_0));
    t[i].depends_on = {"lr"};
    t[i].cross_check = [](const LC& c) {
      return c.min_lr <= c.lr ? std::string() : fmt::format("a number <= lr ({})", c.lr);
    };
  }
  add_choice(
      bind_key("lr_decay_style", &LC::lr_decay_style, "decay from lr to min_lr after the warm-up",
               "one of cosine, linear, constant"),
      {"cosine", "linear", "constant"});
  add(bind_key("lr_warmup_samples", &LC::lr_warmup_samples,
               "samples of linear warm-up from 0 to lr", "an integer >= 0", int64_at_least_0));
  {
    const auto i =
        add(bind_key("lr_decay_samples", &LC::lr_decay_samples,
                     "samples after which the learning rate is min_lr (warm-up included)",
                     "an integer >= 0", int64_at_least_0));
    t[i].depends_on = {"lr_warmup_samples", "lr_decay_style"};
    t[i].cross_check = [](const LC& c) {
      return c.lr_decay_style == "constant" || c.lr_decay_samples > c.lr_warmup_samples
                 ? std::string()
                 : fmt::format("more than lr_warmup_samples ({})", c.lr_warmup_samples);
    };
  }
  add(bind_key("adam_beta1", &LC::adam_beta1, "Adam's first-moment decay", "a number in [0, 1)",
               probability));
  add(bind_key("adam_beta2", &LC::adam_beta2, "Adam's second-moment decay", "a number in [0, 1)",
               probability));
  add(bind_key("adam_eps", &LC::adam_eps, "Adam's epsilon", "a number > 0", number_above_0));
  add(bind_key("weight_decay", &LC::weight_decay,
               "decoupled weight decay on weight matrices and embeddings (not biases or LayerNorm)",
               "a number >= 0", number_at_least_0));
  add(bind_key("clip_grad", &LC::clip_grad, "global gradient-norm clip; 0: none", "a number >= 0",
               number_at_least_0));
  add(bind_key("initial_loss_scale", &LC::initial_loss_scale,
               "fp16: the dynamic loss scale at the start", "a number > 0", number_above_0));
  {
    const auto i = add(bind_key("min_loss_scale", &LC::min_loss_scale,
                                "fp16: the loss scale is never halved below this", "a number > 0",
                                number_above_0));
    t[i].depends_on = {"initial_loss_scale"};
    t[i].cross_check = [](const LC& c) {
      return c.min_loss_scale <= c.initial_loss_scale
                 ? std::string()
                 : fmt::format("a number <= initial_loss_scale ({})", c.initial_loss_scale);
    };
  }
  add(bind_key("loss_scale_window", &LC::loss_scale_window,
               "fp16: good iterations in a row after which the loss scale doubles",
               "an integer >= 1", int64_at_least_1));
  add(bind_key("hysteresis", &LC::hysteresis,
               "fp16: overflowing iterations tolerated before the loss scale is halved (reset when "
               "it grows)",
               "an integer >= 1", int64_at_least_1));
  add(bind_key(
      "use_distributed_optimizer", &LC::use_distributed_optimizer,
      "1 shards Adam's state over the data-parallel ranks (each keeps and updates 1/DP of it)",
      rules::kBoolAllowed, rules::bool_any));
  add_choice(bind_key("optimizer_kernel", &LC::optimizer_kernel,
                      "fused: AdamW's update in one pass over each parameter (CPU only); "
                      "libtorch: LibTorch's AdamW operations (the reference); auto: fused on a "
                      "CPU, libtorch elsewhere; the same update either way",
                      "one of auto, fused, libtorch"),
             {"auto", "fused", "libtorch"});
  add_choice(bind_key("gemm_kernel", &LC::gemm_kernel,
                      "the linear layers' matrix products: onednn (oneDNN's sgemm, float32 on a "
                      "CPU), libtorch (at::linear, the reference), probe (per shape and product, "
                      "oneDNN's or our own sgemm where a measurement in the process finds it "
                      ">= 10 % faster than at::mm); auto: probe on a CPU, libtorch elsewhere",
                      "one of auto, probe, onednn, libtorch"),
             {"auto", "probe", "onednn", "libtorch"});
  add_choice(bind_key("gelu_kernel", &LC::gelu_kernel,
                      "the MLP's tanh GELU: native (one vectorised pass forward and backward, "
                      "float32 and bf16 on a CPU), libtorch (at::gelu, the reference); auto: "
                      "native on a CPU, libtorch elsewhere; the same function either way",
                      "one of auto, native, libtorch"),
             {"auto", "native", "libtorch"});
  add_choice(bind_key("loss_kernel", &LC::loss_kernel,
                      "the output layer's cross-entropy: native (the product and the loss as one "
                      "node, the logits turned into their gradient in place; float32 on a CPU "
                      "with one tensor-parallel rank), libtorch (LibTorch's operations, the "
                      "reference); auto: native on a CPU with one tensor-parallel rank in fp32, "
                      "libtorch elsewhere; the same loss either way",
                      "one of auto, native, libtorch"),
             {"auto", "native", "libtorch"});

  // Logging, validation, checkpoints.
  add(bind_key("log_interval", &LC::log_interval, "iterations per Megatron log line",
               "an integer >= 1", int64_at_least_1));
  const auto interval = [&](const char* name, int64_t LC::*member, const char* help, bool zero_ok) {
    const auto i = add(bind_key(name, member, help, "an integer >= 0", int64_at_least_0));
    t[i].depends_on = {"log_interval"};
    t[i].cross_check = [member, zero_ok](const LC& c) {
      return whole_log_intervals(c.*member, c.log_interval, zero_ok);
    };
  };
  interval("timing_warmup_iters", &LC::timing_warmup_iters,
           "first iterations, excluded by name from the steady figures (not the LR warm-up)", true);
  interval("eval_interval", &LC::eval_interval, "validation every this many iterations; 0: never",
           true);
  add(bind_key("eval_iters", &LC::eval_iters, "global batches per validation", "an integer >= 1",
               int64_at_least_1));
  interval("save_interval", &LC::save_interval, "checkpoint every this many iterations; 0: none",
           true);

  // Data.
  add(bind_path("data_path", &LC::data_path,
                "prefix of an indexed dataset (<prefix>.bin and .idx); empty: synthetic tokens",
                "a path prefix, or empty"));
  add(bind_key(
      "split", &LC::split, "train,valid,test weights of the indexed dataset (CARAML: 7,3,1)",
      "train,valid,test weights: numbers >= 0 separated by ',' or '/', one of them > 0 "
      "(e.g. 969,30,1)",
      +[](const std::string& v) { return split_weights_ok(v); }));
  add(bind_path("vocab_file", &LC::vocab_file, "GPT-2 BPE vocabulary (vocab.json)",
                "a path, or empty"));
  add(bind_path("merge_file", &LC::merge_file, "GPT-2 BPE merges (merges.txt)",
                "a path, or empty"));
  add_choice(bind_key("tokenizer_type", &LC::tokenizer_type, "tokenizer of the indexed dataset",
                      "GPT2BPETokenizer"),
             {"GPT2BPETokenizer"});
  add(bind_key("synthetic_train_samples", &LC::synthetic_train_samples,
               "sequences the synthetic training stream cycles through", "an integer >= 1",
               int64_at_least_1));
  add(bind_key("synthetic_valid_samples", &LC::synthetic_valid_samples,
               "synthetic validation sequences", "an integer >= 1", int64_at_least_1));

  // Run.
  add(rules::dataloader_workers_key<LC>());
  add(rules::device_key<LC>(/*extension=*/false));
  add(rules::device_sharing_key<LC>(/*extension=*/false));
  add(rules::progress_timeout_key<LC>(/*extension=*/false));
  return t;
}

}  // namespace

SchemaT<LlmTrainingConfig> build_schema(SchemaFor<LlmTrainingConfig>) {
  SchemaT<LlmTrainingConfig> s;
  s.command = "llm_training";
  s.keys = llm_training_keys();
  return s;
}

SCAFFOLD_CONFIG_STRUCT(LlmTrainingConfig);

}  // namespace scaffold::config
