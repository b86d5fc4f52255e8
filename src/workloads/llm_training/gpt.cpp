// The GPT's layers as straight lists of LibTorch operations (llm.c's gpt2_forward in
// miniature). The one version-dependent call, the fused attention, is chosen at build time:
// at::scaled_dot_product_attention from LibTorch 2.0, 1.13's prototype otherwise; both are
// tested against the plain implementation.
#include "workloads/llm_training/gpt.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/init.h>
#include <torch/version.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/gelu.hpp"
#include "nn/checkpoint.hpp"

#if TORCH_VERSION_MAJOR >= 2
#define SCAFFOLD_HAS_SDPA 1
#else
#define SCAFFOLD_HAS_SDPA 0
#endif

namespace scaffold::llm {

PositionEmbedding parse_position_embedding(const std::string& value) {
  if (value == "learned") return PositionEmbedding::kLearned;
  if (value == "rope") return PositionEmbedding::kRope;
  throw core::Error(fmt::format("position_embedding: '{}' is not one of learned, rope", value));
}

Recompute parse_recompute(const std::string& value) {
  if (value == "none") return Recompute::kNone;
  if (value == "selective") return Recompute::kSelective;
  if (value == "full") return Recompute::kFull;
  throw core::Error(
      fmt::format("recompute_granularity: '{}' is not one of none, selective, full", value));
}

std::string native_attention_unsupported(const c10::Device& device, double attention_dropout,
                                         int64_t head_size) {
  if (!device.is_cpu()) return fmt::format("it runs on a CPU, this run on {}", device.str());
  if (attention_dropout > 0) return fmt::format("attention_dropout is {}", attention_dropout);
  if (head_size % 16 != 0)
    return fmt::format("the head size {} is not a multiple of 16", head_size);
  return "";
}

AttentionImpl parse_attention(const std::string& value, const std::string& why_not_native) {
  if (value == "plain") return AttentionImpl::kPlain;
  if (value == "fused") return AttentionImpl::kFused;
  if (value == "native") {
    if (!why_not_native.empty())
      throw core::Error(fmt::format("attention: native cannot run this model: {}", why_not_native));
    return AttentionImpl::kNative;
  }
  // 1.13's prototype runs the same math as the plain version on CPU, and was slower there.
  if (value == "auto") {
    if (why_not_native.empty()) return AttentionImpl::kNative;
    return SCAFFOLD_HAS_SDPA ? AttentionImpl::kFused : AttentionImpl::kPlain;
  }
  throw core::Error(fmt::format("attention: '{}' is not one of auto, native, fused, plain", value));
}

const char* to_string(AttentionImpl impl) {
  if (impl == AttentionImpl::kPlain) return "plain";
  if (impl == AttentionImpl::kNative) return "native";
  return SCAFFOLD_HAS_SDPA ? "fused (scaled_dot_product_attention)"
                           : "fused (1.13 _scaled_dot_product_attention)";
}

int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int64_t tp) {
  const int64_t multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

bool attention_keeps_scores(AttentionImpl impl) {
  return impl == AttentionImpl::kPlain || (impl == AttentionImpl::kFused && !SCAFFOLD_HAS_SDPA);
}

int64_t gpt_parameter_count(const GptOptions& o) {
  const int64_t h = o.hidden_size, f = o.ffn_hidden_size;
  const int64_t per_layer = 4 * h * h + 4 * h    // QKV and attention output, with biases
                            + 2 * h * f + f + h  // the two MLP linears, with biases
                            + 4 * h;             // two LayerNorms
  const int64_t positions =
      o.position_embedding == PositionEmbedding::kLearned ? o.seq_length * h : 0;
  return o.padded_vocab_size * h + positions + o.num_layers * per_layer + 2 * h;
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            AttentionImpl impl, double dropout_p, bool training) {
  const double p = training ? dropout_p : 0.0;
  if (impl == AttentionImpl::kFused) {
#if SCAFFOLD_HAS_SDPA
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p, /*is_causal=*/true);
#else
    return std::get<0>(at::_scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p,
                                                         /*need_attn_weights=*/false,
                                                         /*is_causal=*/true));
#endif
  }
  const int64_t s = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor future = at::ones({s, s}, q.options().dtype(at::kBool)).triu(1);  // (S, S) j > i
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);                // (B, a, S, S)
  // Softmax in float32 whatever the autocast dtype (Megatron's attention_softmax_in_fp32).
  at::Tensor probs =
      at::softmax(scores.masked_fill_(future, -INFINITY), -1, at::kFloat).to(v.scalar_type());
  if (p > 0) probs = at::dropout(probs, p, true);
  return at::matmul(probs, v);
}

at::Tensor rotary_tables(int64_t s, int64_t d, double base, const at::TensorOptions& options) {
  const auto f32 = options.dtype(at::kFloat);
  const at::Tensor inv_freq =
      at::pow(base, at::arange(0, d, 2, f32) / static_cast<double>(d)).reciprocal();  // (d/2)
  const at::Tensor angles = at::outer(at::arange(s, f32), inv_freq);                  // (S, d/2)
  const at::Tensor emb = at::cat({angles, angles}, -1);                               // (S, d)
  return at::stack({emb.cos(), emb.sin()});
}

at::Tensor apply_rotary(const at::Tensor& x, double base) {
  const int64_t s = x.size(-2), d = x.size(-1);
  const at::Tensor tables = rotary_tables(s, d, base, x.options()).to(x.scalar_type());
  const at::Tensor cos = tables[0], sin = tables[1];
  const at::Tensor x1 = x.narrow(-1, 0, d / 2), x2 = x.narrow(-1, d / 2, d / 2);
  const at::Tensor rotated = at::cat({x2.neg(), x1}, -1);  // Megatron's _rotate_half
  return x * cos + rotated * sin;
}

namespace {

// A weight drawn whole, then this rank's block of rows (dim 0) or columns (dim 1).
at::Tensor sharded_normal(int64_t rows, int64_t cols, double std, int dim,
                          const TensorParallel* tp) {
  at::Tensor full = at::empty({rows, cols}).normal_(0.0, std);
  if (tp == nullptr || tp->size == 1) return full;
  const auto [begin, end] = shard_range(full.size(dim), tp->size, tp->rank);
  return full.narrow(dim, begin, end - begin).contiguous();
}

const TensorParallel* raw(const std::shared_ptr<const TensorParallel>& tp) {
  return tp.get();
}
int tp_size(const std::shared_ptr<const TensorParallel>& tp) {
  return tp ? tp->size : 1;
}

}  // namespace

GptBlockImpl::GptBlockImpl(const GptOptions& o, std::shared_ptr<const TensorParallel> tp)
    : options_(o), tp_(std::move(tp)) {
  const int64_t h = o.hidden_size, f = o.ffn_hidden_size, t = tp_size(tp_);
  const double out_std = o.init_method_std / std::sqrt(2.0 * static_cast<double>(o.num_layers));
  const auto norm = torch::nn::LayerNormOptions({h}).eps(o.layernorm_epsilon);
  input_layernorm = register_module("input_layernorm", torch::nn::LayerNorm(norm));
  qkv_weight =
      register_parameter("qkv_weight", sharded_normal(3 * h, h, o.init_method_std, 0, raw(tp_)));
  qkv_bias = register_parameter("qkv_bias", at::zeros({3 * h / t}));
  dense_weight = register_parameter("dense_weight", sharded_normal(h, h, out_std, 1, raw(tp_)));
  dense_bias = register_parameter("dense_bias", at::zeros({h}));
  post_attention_layernorm =
      register_module("post_attention_layernorm", torch::nn::LayerNorm(norm));
  fc1_weight =
      register_parameter("fc1_weight", sharded_normal(f, h, o.init_method_std, 0, raw(tp_)));
  fc1_bias = register_parameter("fc1_bias", at::zeros({f / t}));
  fc2_weight = register_parameter("fc2_weight", sharded_normal(h, f, out_std, 1, raw(tp_)));
  fc2_bias = register_parameter("fc2_bias", at::zeros({h}));
}

// In front of a column-parallel linear: the whole sequence (all-gathered from the blocks with
// sequence parallelism), its gradient summed over the group backward.
at::Tensor GptBlockImpl::into_parallel(const at::Tensor& x) const {
  return options_.sequence_parallel ? gather_from_sequence_region(x, tp_)
                                    : copy_to_tp_region(x, tp_);
}

// After a row-parallel linear: the partial sums added over the group (and split into this
// rank's sequence block with sequence parallelism).
at::Tensor GptBlockImpl::out_of_parallel(const at::Tensor& x) const {
  return options_.sequence_parallel ? reduce_scatter_to_sequence_region(x, tp_)
                                    : reduce_from_tp_region(x, tp_);
}

at::Tensor GptBlockImpl::linear(const at::Tensor& x, const at::Tensor& w,
                                const at::Tensor& b) const {
  return kernels::linear(x, w, b, options_.gemm, options_.kernel_use.get());
}

at::Tensor GptBlockImpl::attention(const at::Tensor& x) {
  const int64_t heads = options_.num_attention_heads / tp_size(tp_);
  const int64_t d = options_.hidden_size / options_.num_attention_heads;
  const at::Tensor projected = linear(into_parallel(x), qkv_weight, qkv_bias);  // (B, S, 3h/t)
  // The native kernel keeps nothing S x S: selective recompute has nothing to recompute there.
  const at::Tensor merged = options_.attention == AttentionImpl::kNative
                                ? native_attention(projected, heads, d)
                                : core_attention(projected, heads, d);  // (B, S, h/t)
  at::Tensor out = out_of_parallel(linear(merged, dense_weight, {})) + dense_bias;
  return options_.hidden_dropout > 0 ? at::dropout(out, options_.hidden_dropout, is_training())
                                     : out;
}

at::Tensor GptBlockImpl::native_attention(const at::Tensor& projected, int64_t heads, int64_t d) {
  kernels::KernelUse* use = options_.kernel_use.get();
  const at::Tensor rotary =
      options_.position_embedding == PositionEmbedding::kRope
          ? rotary_tables(projected.size(1), d, options_.rotary_base, projected.options())
          : at::Tensor();
  const std::string why = kernels::causal_attention_unsupported(projected, heads, rotary);
  if (why.empty()) {
    if (use) use->ran("attention", "native");
    return kernels::causal_attention(projected, heads, 1.0 / std::sqrt(static_cast<double>(d)),
                                     rotary);
  }
  if (use) use->ran("attention", "plain", why);
  return core_attention(projected, heads, d);
}

at::Tensor GptBlockImpl::core_attention(const at::Tensor& projected, int64_t heads, int64_t d) {
  const int64_t b = projected.size(0), s = projected.size(1);
  const at::Tensor qkv = projected.view({b, s, heads, 3, d}).permute({3, 0, 2, 1, 4});
  at::Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);  // (B, a/t, S, d)
  if (options_.position_embedding == PositionEmbedding::kRope) {
    q = apply_rotary(q, options_.rotary_base);
    k = apply_rotary(k, options_.rotary_base);
  }
  const AttentionImpl impl = options_.attention;
  const double dropout = options_.attention_dropout;
  const bool training = is_training();
  at::Tensor context;  // (B, a/t, S, d)
  if (options_.recompute == Recompute::kSelective) {
    // Megatron's selective recompute: the core attention (the S^2 activations) is recomputed.
    context = nn::checkpoint(
        [impl, dropout, training](at::TensorList in) {
          return causal_attention(in[0], in[1], in[2], impl, dropout, training);
        },
        {q, k, v}, {});
  } else {
    context = causal_attention(q, k, v, impl, dropout, training);
  }
  return context.transpose(1, 2).reshape({b, s, heads * d});
}

at::Tensor GptBlockImpl::gelu(const at::Tensor& x) const {
  kernels::KernelUse* use = options_.kernel_use.get();
  if (options_.native_gelu && kernels::gelu_tanh_supported(x)) {
    if (use) use->ran("gelu", "native");
    return kernels::gelu_tanh(x);
  }
  if (use)
    use->ran("gelu", "libtorch", options_.native_gelu ? "not a float32 or bf16 CPU tensor" : "");
  return at::gelu(x, "tanh");
}

at::Tensor GptBlockImpl::mlp(const at::Tensor& x) {
  const at::Tensor up = gelu(linear(into_parallel(x), fc1_weight, fc1_bias));  // (B, S, F/t)
  at::Tensor out = out_of_parallel(linear(up, fc2_weight, {})) + fc2_bias;     // (B, S, h)
  return options_.hidden_dropout > 0 ? at::dropout(out, options_.hidden_dropout, is_training())
                                     : out;
}

at::Tensor GptBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h = x + attention(input_layernorm->forward(x));
  return h + mlp(post_attention_layernorm->forward(h));
}

std::pair<int64_t, int64_t> stage_layers(int64_t num_layers, int virtual_stages,
                                         int virtual_stage) {
  SCAFFOLD_CHECK(virtual_stages >= 1 && virtual_stage >= 0 && virtual_stage < virtual_stages &&
                     num_layers % virtual_stages == 0,
                 fmt::format("GPT: {} layers do not split into {} pipeline stages of equal size",
                             num_layers, virtual_stages));
  const int64_t per_stage = num_layers / virtual_stages;
  return {virtual_stage * per_stage, (virtual_stage + 1) * per_stage};
}

int64_t GptImpl::first_layer(int chunk) const {
  return stage_layers(options_.num_layers, stage_.virtual_stages(), stage_.virtual_stage(chunk))
      .first;
}

GptImpl::GptImpl(const GptOptions& o, std::shared_ptr<const TensorParallel> tp, PipelineStage stage)
    : options_(o), tp_(std::move(tp)), stage_(stage) {
  const int t = tp_size(tp_);
  SCAFFOLD_CHECK(
      o.hidden_size % o.num_attention_heads == 0 && o.num_attention_heads % t == 0 &&
          o.ffn_hidden_size % t == 0 && o.padded_vocab_size % t == 0,
      fmt::format(
          "GPT: hidden {} / heads {} / FFN {} / vocabulary {} do not split over {} tensor-parallel "
          "ranks",
          o.hidden_size, o.num_attention_heads, o.ffn_hidden_size, o.padded_vocab_size, t));
  SCAFFOLD_CHECK(o.position_embedding == PositionEmbedding::kLearned ||
                     (o.hidden_size / o.num_attention_heads) % 2 == 0,
                 "GPT: rotary embeddings need an even head size");
  if (t == 1) options_.sequence_parallel = false;  // nothing to split
  SCAFFOLD_CHECK(!options_.sequence_parallel || o.seq_length % t == 0,
                 fmt::format("GPT: sequence parallelism splits the {} positions into {} blocks",
                             o.seq_length, t));
  SCAFFOLD_CHECK(stage_.chunks >= 1, "GPT: a pipeline stage holds at least one model chunk");
  // Which global layers this rank holds, chunk after chunk (ascending, as they are drawn).
  std::vector<bool> mine(static_cast<std::size_t>(o.num_layers), false);
  for (int k = 0; k < stage_.chunks; ++k) {
    const auto [begin, end] =
        stage_layers(o.num_layers, stage_.virtual_stages(), stage_.virtual_stage(k));
    for (int64_t i = begin; i < end; ++i) mine[static_cast<std::size_t>(i)] = true;
  }
  // Every stage draws every weight in the same order, so each keeps what one process holding the
  // whole model would have; what a stage does not hold is dropped as soon as it is drawn.
  const at::Tensor embedding =
      sharded_normal(o.padded_vocab_size, o.hidden_size, o.init_method_std, 0, raw(tp_));
  // The tied embedding: the first stage looks tokens up in it, the last computes the logits.
  if (stage_.first() || stage_.last())
    word_embeddings = register_parameter("word_embeddings", embedding);
  if (o.position_embedding == PositionEmbedding::kLearned) {
    at::Tensor positions = at::empty({o.seq_length, o.hidden_size}).normal_(0.0, o.init_method_std);
    if (stage_.first()) position_embeddings = register_parameter("position_embeddings", positions);
  }
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.num_layers; ++i) {
    GptBlock block(options_, tp_);
    if (mine[static_cast<std::size_t>(i)]) layers->push_back(block);
  }
  if (stage_.last())
    final_layernorm =
        register_module("final_layernorm",
                        torch::nn::LayerNorm(
                            torch::nn::LayerNormOptions({o.hidden_size}).eps(o.layernorm_epsilon)));
}

bool GptImpl::is_tensor_parallel(const std::string& name) {
  for (const char* sharded : {"word_embeddings", "qkv_weight", "qkv_bias", "dense_weight",
                              "fc1_weight", "fc1_bias", "fc2_weight"}) {
    const std::string suffix(sharded);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.'))
      return true;
  }
  return false;
}

bool GptImpl::is_sequence_parallel(const std::string& name) {
  for (const char* part : {"layernorm.", "dense_bias", "fc2_bias"})
    if (name.find(part) != std::string::npos) return true;
  return false;
}

void GptImpl::reduce_sequence_parallel_gradients() {
  if (!options_.sequence_parallel) return;
  std::vector<at::Tensor> grads;
  for (const auto& named : named_parameters())
    if (is_sequence_parallel(named.key()) && named.value().grad().defined())
      grads.push_back(named.value().grad());
  if (grads.empty()) return;
  // One all-reduce of the flattened gradients (a few vectors of h per layer).
  std::vector<at::Tensor> flat;
  for (const at::Tensor& g : grads) flat.push_back(g.reshape({-1}).to(at::kFloat));
  at::Tensor buffer = at::cat(flat);
  tp_->group->allreduce_sum(buffer)->wait();
  int64_t offset = 0;
  for (at::Tensor& g : grads) {
    g.copy_(buffer.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

at::Tensor GptImpl::embed(const at::Tensor& tokens) {
  const int64_t s = tokens.size(1);
  SCAFFOLD_CHECK(s <= options_.seq_length,
                 fmt::format("GPT: {} tokens in a sequence, the model has {} positions", s,
                             options_.seq_length));
  tied_link_.reset();
  at::Tensor x;  // (B, S', h)
  if (options_.tied_gradient && (!tp_ || tp_->size == 1) && stage_.size == 1 &&
      at::GradMode::is_enabled() && word_embeddings.requires_grad()) {
    tied_link_ = tied_embedding_link();
    x = tied_embedding(tokens, word_embeddings, tied_link_);
  } else {
    x = vocab_parallel_embedding(tokens, word_embeddings, tp_);
  }
  if (position_embeddings.defined()) x = x + position_embeddings.narrow(0, 0, s);
  if (options_.sequence_parallel) x = scatter_to_sequence_region(x, tp_);  // (B, S'/t, h)
  if (options_.hidden_dropout > 0) x = at::dropout(x, options_.hidden_dropout, is_training());
  return x;
}

at::Tensor GptImpl::stage_forward(const at::Tensor& input, int chunk) {
  SCAFFOLD_CHECK(chunk >= 0 && chunk < stage_.chunks,
                 fmt::format("GPT: model chunk {} of {}", chunk, stage_.chunks));
  const int s = stage_.virtual_stage(chunk);
  at::Tensor x = s == 0 ? embed(input) : input;
  const int64_t n = layers_per_chunk();
  for (int64_t i = chunk * n; i < (chunk + 1) * n; ++i) {
    auto block = layers->ptr<GptBlockImpl>(static_cast<std::size_t>(i));
    if (options_.recompute == Recompute::kFull && is_training()) {
      const auto params = block->parameters();
      x = nn::checkpoint([block](at::TensorList in) { return block->forward(in[0]); }, {x}, params);
    } else {
      x = block->forward(x);
    }
  }
  return s == stage_.virtual_stages() - 1 ? final_layernorm->forward(x) : x;
}

at::Tensor GptImpl::losses_from_hidden(const at::Tensor& hidden, const at::Tensor& labels) {
  SCAFFOLD_CHECK(stage_.last(), "GPT: the loss is computed on the last pipeline stage");
  kernels::KernelUse* use = options_.kernel_use.get();
  if (options_.native_loss) {
    const bool one_rank = !tp_ || tp_->size == 1;
    const at::Tensor flat_hidden = hidden.reshape({-1, hidden.size(-1)});
    const at::Tensor flat_labels = labels.reshape({-1});
    const std::string why = one_rank ? kernels::linear_cross_entropy_unsupported(
                                           flat_hidden, word_embeddings, flat_labels)
                                     : "tensor parallelism (the vocabulary is split over ranks)";
    if (why.empty()) {
      if (use) use->ran("loss", "native");
      return kernels::linear_cross_entropy(flat_hidden, output_weight(), flat_labels, options_.gemm)
          .view(labels.sizes());
    }
    if (use) use->ran("loss", "libtorch", why);
  } else if (use) {
    use->ran("loss", "libtorch");
  }
  const at::Tensor logits = output_layer(hidden);  // of the last chunk's output
  const at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  return vocab_parallel_cross_entropy(flat, labels.reshape({-1}), tp_).view(labels.sizes());
}

at::Tensor GptImpl::output_weight() {
  return tied_link_ ? tied_output_weight(word_embeddings, std::exchange(tied_link_, {}))
                    : word_embeddings;
}

at::Tensor GptImpl::output_layer(const at::Tensor& hidden) {
  // The token embedding, transposed (Megatron's parallel_lm_logits).
  return kernels::linear(options_.sequence_parallel ? gather_from_sequence_region(hidden, tp_)
                                                    : copy_to_tp_region(hidden, tp_),
                         output_weight(), {}, options_.gemm,
                         options_.kernel_use.get());  // (B, S', V/t)
}

at::Tensor GptImpl::forward(const at::Tensor& tokens) {
  SCAFFOLD_CHECK(stage_.size == 1, "GPT: forward() runs the whole model, not one pipeline stage");
  return output_layer(stage_forward(tokens));
}

at::Tensor GptImpl::token_losses(const at::Tensor& tokens, const at::Tensor& labels) {
  SCAFFOLD_CHECK(stage_.size == 1,
                 "GPT: token_losses() runs the whole model, not one pipeline stage");
  return losses_from_hidden(stage_forward(tokens), labels);
}

}  // namespace scaffold::llm
