// The memory an llm_training configuration certainly needs on each rank, before anything is
// allocated (core/memory_budget.hpp checks it against the machine): the model state, one
// layer's attention probabilities where the attention keeps them, the output layer's logits and
// the layer inputs kept for the backward pass. With pipeline stages it is the first stage's rank
// (the embeddings, num_layers / P layers and the most micro-batches in flight: min(P, m), with v
// model chunks min(v m, 2 (P - 1) + (v - 1) P + 1) chunks of num_layers / (P v) layers); the
// logits are then on another rank. Each item names the config keys that set it.
// Torch-free: the fuzz target drives it with any configuration the schema accepts.
#pragma once

#include <cstdint>

#include "core/memory_budget.hpp"
#include "workloads/llm_training/options.hpp"

namespace scaffold::llm {

struct LlmMemoryLayout {
  int64_t tensor_parallel = 1;    // the tensor-parallel size the run will use
  int64_t pipeline_parallel = 1;  // pipeline stages (the estimate is the first stage's rank)
  int64_t model_chunks = 1;       // per pipeline rank (interleaved schedule)
  int64_t micro_batches = 1;      // per iteration (with stages: how many are in flight)
  int64_t data_parallel = 1;      // its data-parallel size (divides Adam's state with
                                  // use_distributed_optimizer)
  bool attention_keeps_scores =
      true;  // the attention kernel materialises (B, a, s, s) probabilities
};

// Megatron's padded vocabulary: the smallest multiple of divisible_by x tensor_parallel that holds
// vocab (as the model pads it), in double so an absurd vocabulary cannot overflow.
double padded_vocab_estimate(int64_t vocab, int64_t divisible_by, int64_t tensor_parallel);

// GPT's trainable parameters for these dimensions (the same formula as the model's count).
double gpt_parameters_estimate(const config::GptDims& dims, double padded_vocab,
                               bool learned_positions);

core::MemoryEstimate llm_memory_estimate(const config::LlmTrainingConfig& cfg,
                                         const LlmMemoryLayout& layout);

}  // namespace scaffold::llm
