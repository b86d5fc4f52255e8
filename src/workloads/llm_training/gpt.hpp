// Megatron-LM's GPT decoder (the model CARAML trains): token embeddings (vocabulary padded to a
// multiple of 128 x TP) plus learned absolute position embeddings or rotary embeddings on queries
// and keys, pre-LayerNorm blocks of causal multi-head self-attention and a GELU (tanh) MLP, a
// final LayerNorm and logits through the tied token embedding. Tensor parallel in Megatron's
// style: column-parallel QKV and first MLP linear, row-parallel attention output and second MLP
// linear, vocabulary-parallel embedding and logits (tensor_parallel.hpp). Initialisation as
// Megatron's: normal(0, std) for weights, std / sqrt(2 L) for the two output projections of each
// block, zero biases; each rank keeps its slice of the full (master) weight, so any TP size
// starts from the same model. Pipeline parallel in Megatron's style: a stage holds a contiguous
// run of layers (or, interleaved, several model chunks), the first also the embeddings, the last
// the final LayerNorm and a copy of the tied embedding for the logits (pipeline.hpp schedules the
// stages). Not here: SwiGLU, MoE.
// Legend: B batch, S sequence, h hidden, a heads, d = h/a head size, F FFN hidden, V padded
// vocabulary, L layers, t tensor-parallel size.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kernels/dnnl_linear.hpp"
#include "kernels/kernel_use.hpp"
#include "workloads/llm_training/tensor_parallel.hpp"

namespace scaffold::llm {

enum class PositionEmbedding { kLearned, kRope };
// kFused: LibTorch's scaled_dot_product_attention (2.x; 1.13's prototype
// _scaled_dot_product_attention); kPlain: matmul, causal mask, float32 softmax, matmul; kNative:
// kernels::causal_attention (tiled, online softmax, on the QKV projection in place; CPU only).
enum class AttentionImpl { kPlain, kFused, kNative };
enum class Recompute { kNone, kSelective, kFull };

// Parse the config's text; core::Error naming the value otherwise.
PositionEmbedding parse_position_embedding(const std::string& value);
Recompute parse_recompute(const std::string& value);
// Why the native attention cannot run this model, "" when it can: it needs a CPU, no attention
// dropout, and a head size that is a multiple of 16.
std::string native_attention_unsupported(const c10::Device& device, double attention_dropout,
                                         int64_t head_size);
// The config's `attention` for a run whose native_attention_unsupported is `why_not_native`:
// "auto" -> kNative where that is empty, else kFused where LibTorch >= 2.0 (a build-time version
// check), else kPlain; "native" where it cannot run is a core::Error naming the key and the reason.
AttentionImpl parse_attention(const std::string& value, const std::string& why_not_native);
const char* to_string(AttentionImpl impl);
// Whether the kernel materialises the (B, heads, s, s) probabilities: the plain one always, the
// fused one on LibTorch 1.13 (its _scaled_dot_product_attention computes them in full), the
// native one never.
bool attention_keeps_scores(AttentionImpl impl);

struct GptOptions {
  int64_t num_layers = 12;            // L
  int64_t hidden_size = 768;          // h
  int64_t num_attention_heads = 12;   // a
  int64_t ffn_hidden_size = 3072;     // F
  int64_t seq_length = 1024;          // S (the learned position table's length)
  int64_t padded_vocab_size = 50304;  // V (padded_vocab_size() of the tokenizer's vocabulary)
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  double init_method_std = 0.02;
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  AttentionImpl attention = AttentionImpl::kPlain;
  Recompute recompute = Recompute::kNone;
  double layernorm_epsilon = 1e-5;
  double rotary_base = 10000.0;
  // Megatron's --sequence-parallel: with t > 1 the LayerNorms, dropouts, residuals and the biases
  // of the row-parallel linears work on (B, S'/t, h) blocks of the sequence (S' divisible by t).
  bool sequence_parallel = false;
  // The linear layers' matrix products (kernels/dnnl_linear.hpp): LibTorch's, oneDNN's, or per
  // shape by a probe; counted in kernel_use when set (system.json's kernels_run).
  kernels::GemmKernel gemm = kernels::GemmKernel::LibTorch;
  // The MLP's tanh GELU by kernels::gelu_tanh (true) where it takes the tensor, else at::gelu;
  // counted in kernel_use (op "gelu") when set.
  bool native_gelu = false;
  // The output layer and the cross-entropy as one node (kernels::linear_cross_entropy: the
  // logits turned into their gradient in place, no softmax kept) where it takes the tensors
  // (float32 on a CPU, one tensor-parallel rank, not under autocast), else the linear and
  // vocab_parallel_cross_entropy; counted in kernel_use (op "loss") when set.
  bool native_loss = false;
  // With one tensor-parallel rank and one stage, the tied embedding's two gradients summed into
  // the output layer's (tensor_parallel.hpp's tied_embedding: the same sums without two passes
  // over the (V, h) weight); false: autograd sums them (the reference the tests compare with).
  bool tied_gradient = true;
  std::shared_ptr<kernels::KernelUse> kernel_use;
};

// This rank's pipeline stage: `rank` of `size` ranks. Without interleaving (chunks 1) it holds
// one contiguous run of num_layers / size layers; with Megatron's interleaved schedule it holds
// `chunks` runs ("model chunks") of num_layers / (size x chunks) layers: chunk k of rank p is
// virtual stage k x size + p of size x chunks, so the layers go round the ranks `chunks` times.
struct PipelineStage {
  int size = 1;  // pipeline_model_parallel_size
  int rank = 0;
  int chunks = 1;                                 // model chunks per rank (virtual stages)
  bool first() const { return rank == 0; }        // holds the embeddings (in its chunk 0)
  bool last() const { return rank == size - 1; }  // the output layer and loss (in its last chunk)
  int virtual_stages() const { return size * chunks; }
  int virtual_stage(int chunk) const { return chunk * size + rank; }
};

// The layers [begin, end) of virtual stage `virtual_stage` of `virtual_stages`: num_layers /
// virtual_stages each, in order (Megatron splits them evenly); SCAFFOLD_CHECK that it divides.
std::pair<int64_t, int64_t> stage_layers(int64_t num_layers, int virtual_stages, int virtual_stage);

// Megatron's _vocab_size_with_padding: the smallest multiple of divisible_by x tp >= vocab.
int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int64_t tp);

// The parameters of the whole model (all shards), in closed form:
// V h + [S h] + L (4 h^2 + 4 h + 2 h F + F + h + 4 h) + 2 h.
int64_t gpt_parameter_count(const GptOptions& o);

// Causal attention over (B, a, S, d) queries, keys and values -> (B, a, S, d).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            AttentionImpl impl, double dropout_p, bool training);

// Rotary embedding (Megatron's, non-interleaved halves) of x (B, a, S, d) at positions 0..S-1.
at::Tensor apply_rotary(const at::Tensor& x, double base);
// The rotary embedding's float32 cos and sin for positions 0..s-1 of a head of size d, stacked:
// (2, s, d), on `options`' device.
at::Tensor rotary_tables(int64_t s, int64_t d, double base, const at::TensorOptions& options);

class GptBlockImpl : public torch::nn::Module {
 public:
  GptBlockImpl(const GptOptions& o, std::shared_ptr<const TensorParallel> tp);
  at::Tensor forward(const at::Tensor& x);  // (B, S, h) -> (B, S, h)
  // The two sublayers without their LayerNorm and residual (forward is x + attention(ln1(x)),
  // then + mlp(ln2(.))); public for the benchmark's time breakdown.
  at::Tensor attention(const at::Tensor& x);  // (B, S, h) normalised -> (B, S, h)
  at::Tensor mlp(const at::Tensor& x);
  at::Tensor into_parallel(const at::Tensor& x) const;
  at::Tensor out_of_parallel(const at::Tensor& x) const;
  // at::linear on the options' GEMM kernel.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;
  // at::gelu(x, "tanh") on the options' kernel (GptOptions::native_gelu).
  at::Tensor gelu(const at::Tensor& x) const;
  // The QKV projection (B, S, 3h/t) -> the heads' outputs side by side (B, S, h/t): by
  // kernels::causal_attention, counted in kernel_use (op "attention"; the plain path with the
  // reason where it cannot take the tensor), or by causal_attention above on views.
  at::Tensor native_attention(const at::Tensor& projected, int64_t heads, int64_t d);
  at::Tensor core_attention(const at::Tensor& projected, int64_t heads, int64_t d);

  torch::nn::LayerNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  at::Tensor qkv_weight;    // (3h/t, h): per head [q; k; v] rows, this rank's a/t heads
  at::Tensor qkv_bias;      // (3h/t)
  at::Tensor dense_weight;  // (h, h/t): this rank's input columns (row-parallel)
  at::Tensor dense_bias;    // (h) replicated, added after the reduction
  at::Tensor fc1_weight;    // (F/t, h) column-parallel (Megatron's dense_h_to_4h)
  at::Tensor fc1_bias;      // (F/t)
  at::Tensor fc2_weight;    // (h, F/t) row-parallel (dense_4h_to_h)
  at::Tensor fc2_bias;      // (h)

 private:
  GptOptions options_;
  std::shared_ptr<const TensorParallel> tp_;
};
TORCH_MODULE(GptBlock);

class GptImpl : public torch::nn::Module {
 public:
  // Draws the full weights from the global generator (call torch::manual_seed first) in a fixed
  // order, then keeps this rank's slices and this stage's layers (one layer drawn at a time).
  explicit GptImpl(const GptOptions& o, std::shared_ptr<const TensorParallel> tp = nullptr,
                   PipelineStage stage = {});
  // The whole model (one pipeline stage): tokens (B, S') int64 with S' <= S -> logits (B, S', V/t)
  // over this rank's vocabulary slice.
  at::Tensor forward(const at::Tensor& tokens);
  // (B, S') per-token loss of predicting `labels` (B, S') from `tokens`, float32, the same on
  // every rank of the tensor-parallel group. The whole model only.
  at::Tensor token_losses(const at::Tensor& tokens, const at::Tensor& labels);

  // One (virtual) pipeline stage's part, this rank's model chunk `chunk`: virtual stage 0 takes
  // tokens (B, S') int64, the others the previous virtual stage's output; returns the hidden
  // states (B, S'', h) (S'' = S'/t with sequence parallelism), after the final LayerNorm on the
  // last virtual stage.
  at::Tensor stage_forward(const at::Tensor& input, int chunk = 0);
  // The last stage: per-token losses (B, S') of `labels` from its stage_forward output.
  at::Tensor losses_from_hidden(const at::Tensor& hidden, const at::Tensor& labels);
  const PipelineStage& stage() const { return stage_; }
  // The global index of chunk `chunk`'s first layer; its layers are layers[chunk x n, (chunk + 1)
  // x n) with n = layers_per_chunk().
  int64_t first_layer(int chunk = 0) const;
  int64_t layers_per_chunk() const { return options_.num_layers / stage_.virtual_stages(); }

  const GptOptions& options() const { return options_; }
  const std::shared_ptr<const TensorParallel>& tensor_parallel() const { return tp_; }
  // Whether named_parameters() entry `name` is split across the tensor-parallel group (the
  // others are replicated and hold the same values on every rank of it).
  static bool is_tensor_parallel(const std::string& name);
  // With sequence parallelism, the replicated parameters applied to sequence blocks (LayerNorms,
  // the biases of the row-parallel linears) get each rank's part of their gradient: this sums
  // those gradients over the tensor-parallel group (Megatron's allreduce of the sequence-
  // parallel gradients). Call after backward, before the gradients are read; a no-op otherwise.
  void reduce_sequence_parallel_gradients();
  // Whether named_parameters() entry `name` is such a parameter.
  static bool is_sequence_parallel(const std::string& name);

  at::Tensor word_embeddings;      // (V/t, h), tied to the output layer; first and last stage
  at::Tensor position_embeddings;  // (S, h), learned positions only; first stage
  torch::nn::ModuleList layers{nullptr};          // this stage's layers
  torch::nn::LayerNorm final_layernorm{nullptr};  // last stage

 private:
  at::Tensor embed(const at::Tensor& tokens);  // (B, S') -> (B, S'', h), the first stage's input
  at::Tensor output_layer(const at::Tensor& hidden);  // the last stage's logits (B, S', V/t)
  // The output layer's weight: the token embedding, through tied_output_weight when embed() left
  // a link (taking it).
  at::Tensor output_weight();
  GptOptions options_;
  std::shared_ptr<const TensorParallel> tp_;
  PipelineStage stage_;
  // Set by embed() where the tied gradient applies (options_.tied_gradient, one rank of tensor
  // parallelism, one stage, autograd recording), taken by the output_weight() that follows.
  c10::intrusive_ptr<TiedEmbeddingLink> tied_link_;
};
TORCH_MODULE(Gpt);

}  // namespace scaffold::llm
