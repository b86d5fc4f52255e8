// The LLM-training configuration: CARAML's GPT pre-training with Megatron-LM (docs/llm.md)
// with its defaults (the 800M model, sequence 2048, Adam 1e-4 -> 1e-5 cosine, init std 0.0048,
// selective recompute, RoPE, fp16, log every 5 iterations, a 30-minute exit duration), and the
// size presets by name (gpt_preset). Built only by config/load (YAML + flags -> validated
// struct); immutable afterwards. Checks that need the rank count or the device (tensor-parallel
// size dividing the ranks, the global batch splitting over data-parallel ranks, fp16 needing
// CUDA) are the driver's. Keys follow Megatron's argument names where it has one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::config {

// A model size preset: Megatron's --num-layers, --hidden-size, --num-attention-heads,
// --ffn-hidden-size (0: 4 x hidden) and --seq-length.
struct GptPreset {
  const char* name;
  int64_t num_layers, hidden_size, num_attention_heads, ffn_hidden_size, seq_length;
};

// The presets in size order: tiny (CPU-sized, the quickstart's), 117M (GPT-2 small, CARAML's
// Graphcore model), 800M, 13B and 175B (CARAML's NVIDIA/AMD sizes).
inline const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets{
      {"tiny", 4, 128, 4, 0, 128},      {"117M", 12, 768, 12, 0, 1024},
      {"800M", 16, 2048, 8, 0, 2048},   {"13B", 40, 5120, 32, 20480, 2048},
      {"175B", 96, 12288, 96, 0, 2048},
  };
  return presets;
}

struct LlmTrainingConfig {
  // Paths. base_run_dir and the data files are resolved against the working directory at load.
  std::string base_run_dir = "llm_training_runs";  // parent of the run directories
  std::string job_name = "llm_training";           // run directory prefix
  std::string checkpoint_dir = "checkpoints";      // subdirectory of the run directory

  int64_t seed = 42;  // the single seed for everything (CARAML: 42)

  // Model: a preset by name; each dimension given as > 0 overrides the preset's.
  std::string model_size = "800M";  // tiny | 117M | 800M | 13B | 175B
  int64_t num_layers = 0;           // L
  int64_t hidden_size = 0;          // h
  int64_t num_attention_heads = 0;  // a (h divisible by it)
  int64_t ffn_hidden_size = 0;      // 0: the preset's, else 4 x hidden_size
  int64_t seq_length = 0;           // s, also the learned position table's length
  int64_t vocab_size = 50257;       // the tokenizer's (GPT-2 BPE: 50257), padded as below
  int64_t make_vocab_size_divisible_by = 128;  // padded vocabulary: a multiple of this x TP
  std::string position_embedding = "rope";     // learned | rope (CARAML's NVIDIA setup: rope)
  double init_method_std = 0.0048;             // CARAML 0.0048; Megatron's default 0.02
  double hidden_dropout = 0.0;                 // off by default (Megatron: 0.1)
  double attention_dropout = 0.0;
  std::string attention = "auto";  // auto | native | fused | plain (gpt.hpp's parse_attention)
  std::string recompute_granularity = "selective";  // none | selective | full
  std::string precision = "fp16";                   // fp32 | bf16 | fp16 (CUDA only)

  // Parallelism: tensor_model_parallel_size x data-parallel size = ranks.
  int64_t tensor_model_parallel_size = 1;
  // Megatron's --sequence-parallel: the LayerNorm and dropout regions split along the sequence,
  // all-gather / reduce-scatter for the all-reduces. Off at tensor_model_parallel_size 1 (as
  // Megatron turns it off: nothing to split), so CARAML's flag set works at any TP size.
  bool sequence_parallel = false;
  // Pipeline stages (Megatron's --pipeline-model-parallel-size): each holds num_layers / P layers;
  // ranks = tensor x pipeline x data-parallel size.
  int64_t pipeline_model_parallel_size = 1;
  // Megatron's --num-layers-per-virtual-pipeline-stage: > 0 interleaves the pipeline, each rank
  // holding num_layers / (P x this) model chunks of this many layers; 0: one chunk per rank.
  int64_t num_layers_per_virtual_pipeline_stage = 0;

  // Batch: micro_batch_size x gradient accumulation x data-parallel size = global_batch_size.
  int64_t micro_batch_size = 4;
  int64_t global_batch_size = 512;  // CARAML's 800M (2025; 32 in 2024)

  // Training length: by iterations and/or wall time, whichever ends first.
  int64_t train_iters = 585937;       // CARAML: 3e8 train samples / 512, never reached
  double exit_duration_in_mins = 30;  // 0: none (CARAML: 30)

  // Optimizer and learning rate (Megatron: Adam with decoupled weight decay).
  double lr = 1e-4;
  double min_lr = 1e-5;
  std::string lr_decay_style = "cosine";  // cosine | linear | constant
  int64_t lr_warmup_samples = 216320;
  int64_t lr_decay_samples = 128953125;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double weight_decay = 0.1;  // on weights, not on biases or LayerNorm parameters
  double clip_grad = 1.0;     // global gradient-norm clip; 0: none
  // fp16's dynamic loss scaler (Megatron's DynamicGradScaler; CARAML's values; bf16 and fp32 do
  // not scale).
  double initial_loss_scale = 4096;  // Megatron's default 2^32
  double min_loss_scale = 1.0;       // never scaled below this (<= initial_loss_scale)
  int64_t loss_scale_window = 500;   // good iterations before the scale doubles (Megatron: 1000)
  int64_t hysteresis = 2;            // overflowing iterations before the scale first halves
  // Adam's state sharded over the data-parallel ranks (Megatron's --use-distributed-optimizer;
  // CARAML passes it): each keeps 1/DP of exp_avg and exp_avg_sq; one checkpoint file per rank.
  bool use_distributed_optimizer = false;
  // fused: AdamW's update in one pass over each parameter's memory (CPU only); libtorch:
  // LibTorch's AdamW operations (the reference); auto: fused on a CPU, libtorch elsewhere.
  std::string optimizer_kernel = "auto";
  // The linear layers' matrix products: onednn (oneDNN's sgemm, float32 on a CPU), libtorch
  // (at::linear, the reference), probe (oneDNN for the shapes where a measurement in the process
  // finds it >= 10 % faster), auto: probe on a CPU, libtorch elsewhere (docs/llm.md). A resumed
  // run keeps the verdicts its checkpoint stored, so it gives the uninterrupted run's losses
  // (docs/llm.md, "The matrix products' kernel").
  std::string gemm_kernel = "auto";
  // The MLP's tanh-approximated GELU: native (kernels/gelu.hpp: one vectorised pass forward and
  // backward, float32 and bf16 on a CPU), libtorch (at::gelu, the reference), auto: native on a
  // CPU, libtorch elsewhere.
  std::string gelu_kernel = "auto";
  // The output layer's cross-entropy: native (kernels::linear_cross_entropy: the product and the
  // loss as one node, the logits turned into their gradient in place; float32 on a CPU with one
  // tensor-parallel rank), libtorch (the linear, then LibTorch's operations: the reference), auto:
  // native on a CPU with one tensor-parallel rank in fp32, libtorch elsewhere.
  std::string loss_kernel = "auto";

  // Logging, validation, checkpoints (iterations).
  int64_t log_interval = 5;
  int64_t timing_warmup_iters = 10;  // first iterations excluded by name from the steady figures
  int64_t eval_interval = 2000;      // validation every this many iterations; 0: never
  int64_t eval_iters = 15;           // global batches per validation
  int64_t save_interval = 0;         // checkpoint every this many iterations; 0: none

  // Data: the synthetic token source unless data_path names an indexed dataset (.bin/.idx).
  std::string data_path;        // prefix of <prefix>.bin/.idx (Megatron's --data-path)
  std::string split = "7,3,1";  // train/valid/test weights (CARAML: 7,3,1)
  std::string vocab_file;       // GPT-2 BPE vocab.json
  std::string merge_file;       // GPT-2 BPE merges.txt
  std::string tokenizer_type = "GPT2BPETokenizer";
  int64_t synthetic_train_samples = 1000000;  // sequences the synthetic stream cycles through
  int64_t synthetic_valid_samples = 10000;

  // Run.
  int dataloader_num_workers = 1;  // data-loading threads per rank
  std::string device = "auto";     // auto | cpu | cuda
  bool device_sharing = false;     // 1 lets ranks of a node share a GPU
  int progress_timeout_s = 1800;   // end the job after this long without a step; 0: never
};

// The model dimensions after the preset and the explicit keys: every field > 0.
struct GptDims {
  int64_t num_layers = 0, hidden_size = 0, num_attention_heads = 0, ffn_hidden_size = 0,
          seq_length = 0;
};
// Throws core::Error for an unknown model_size (the schema already refuses one).
GptDims resolve_gpt_dims(const LlmTrainingConfig& config);

}  // namespace scaffold::config
