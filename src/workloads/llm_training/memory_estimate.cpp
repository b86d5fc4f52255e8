#include "workloads/llm_training/memory_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace scaffold::llm {

double padded_vocab_estimate(int64_t vocab, int64_t divisible_by, int64_t tensor_parallel) {
  const double multiple = static_cast<double>(std::max<int64_t>(1, divisible_by)) *
                          static_cast<double>(std::max<int64_t>(1, tensor_parallel));
  return std::ceil(static_cast<double>(vocab) / multiple) * multiple;
}

double gpt_parameters_estimate(const config::GptDims& d, double padded_vocab,
                               bool learned_positions) {
  const auto h = static_cast<double>(d.hidden_size), f = static_cast<double>(d.ffn_hidden_size);
  const double per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  const double positions = learned_positions ? static_cast<double>(d.seq_length) * h : 0.0;
  return padded_vocab * h + positions + static_cast<double>(d.num_layers) * per_layer + 2 * h;
}

core::MemoryEstimate llm_memory_estimate(const config::LlmTrainingConfig& cfg,
                                         const LlmMemoryLayout& layout) {
  const config::GptDims d = config::resolve_gpt_dims(cfg);
  const auto tp = static_cast<double>(std::max<int64_t>(1, layout.tensor_parallel));
  const auto b = static_cast<double>(cfg.micro_batch_size), s = static_cast<double>(d.seq_length),
             h = static_cast<double>(d.hidden_size), a = static_cast<double>(d.num_attention_heads),
             layers = static_cast<double>(d.num_layers);
  // Activations in the autocast dtype; parameters, gradients and Adam's moments stay float32.
  const double act = cfg.precision == "fp32" ? 4.0 : 2.0;
  const double vocab = padded_vocab_estimate(cfg.vocab_size, cfg.make_vocab_size_divisible_by,
                                             layout.tensor_parallel);
  const bool learned = cfg.position_embedding == "learned";
  // The first stage's share: the embeddings and num_layers / P layers (the whole model at P 1;
  // the final LayerNorm is left out at P > 1).
  const auto stages = static_cast<double>(std::max<int64_t>(1, layout.pipeline_parallel));
  config::GptDims stage_dims = d;
  stage_dims.num_layers =
      std::max<int64_t>(1, d.num_layers / std::max<int64_t>(1, layout.pipeline_parallel));
  const double params =
      gpt_parameters_estimate(stage_dims, vocab, learned) - (stages > 1 ? 2.0 * h : 0.0);
  // The keys that set each size: the model_size preset sets every dimension left at 0.
  const auto dims = [&](std::vector<std::string> keys) {
    keys.emplace_back("model_size");
    return keys;
  };
  std::vector<std::string> param_keys{"num_layers", "hidden_size", "ffn_hidden_size", "vocab_size"};
  if (learned) param_keys.emplace_back("seq_length");
  core::MemoryEstimate e;
  if (!cfg.use_distributed_optimizer) {
    e.add(
        "parameters, gradients and Adam's two moments (16 bytes per parameter / "
        "tensor_model_parallel_size)",
        16.0 * params / tp, dims(param_keys));
  } else {
    // Each rank keeps 1/DP of the moments, and all-gathers the updated parameters in chunks of
    // at most 2^22 float32 elements per rank (train/sharded_adam.hpp).
    const auto dp = static_cast<double>(std::max<int64_t>(1, layout.data_parallel));
    e.add("parameters and gradients (8 bytes per parameter / tensor_model_parallel_size)",
          8.0 * params / tp, dims(param_keys));
    std::vector<std::string> moment_keys = param_keys;
    moment_keys.emplace_back("use_distributed_optimizer");
    e.add(
        "this rank's 1/DP of Adam's two moments (8 bytes per parameter / "
        "tensor_model_parallel_size / data-parallel size)",
        8.0 * params / tp / dp, dims(moment_keys));
    e.add(
        "the distributed optimizer's all-gather: its chunk and DP gathered (at most 2^22 float32 "
        "each)",
        4.0 * (dp + 1.0) * std::min(params / tp / dp, 4194304.0), dims(moment_keys));
  }
  if (layout.attention_keeps_scores) {
    e.add(
        "one layer's attention probabilities (micro_batch_size x heads / TP x seq_length^2, "
        "float32)",
        4.0 * b * (a / tp) * s * s,
        dims({"seq_length", "micro_batch_size", "num_attention_heads"}));
    e.add("the causal mask (seq_length^2 booleans)", s * s, dims({"seq_length"}));
  }
  if (stages == 1)
    e.add("the output layer's logits (micro_batch_size x seq_length x padded vocabulary / TP)",
          act * b * s * vocab / tp, dims({"vocab_size", "seq_length", "micro_batch_size"}));
  // With sequence parallelism each rank keeps its block of the sequence.
  const double seq_held = cfg.sequence_parallel && tp > 1 ? s / tp : s;
  // The first stage's micro-batches in flight under 1F1B: min(P, m) of L / P layers each; with v
  // chunks its warm-up keeps 2 (P - 1) + (v - 1) P + 1 chunk passes of L / (P v) layers.
  const auto m = static_cast<double>(std::max<int64_t>(1, layout.micro_batches));
  const auto chunks = static_cast<double>(std::max<int64_t>(1, layout.model_chunks));
  const double layers_in_flight =
      chunks == 1 ? std::min(stages, m) * (layers / stages)
                  : std::min(chunks * m, 2 * (stages - 1) + (chunks - 1) * stages + 1) *
                        (layers / (stages * chunks));
  e.add(
      "each layer's input, kept for the backward pass (the layers of the passes in flight on the "
      "first pipeline stage x micro_batch_size x seq_length [/ TP with sequence_parallel] x "
      "hidden_size)",
      act * layers_in_flight * b * seq_held * h,
      dims({"num_layers", "seq_length", "micro_batch_size", "hidden_size"}));
  return e;
}

}  // namespace scaffold::llm
