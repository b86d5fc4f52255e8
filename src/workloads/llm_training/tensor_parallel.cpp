// The tensor-parallel autograd functions, each with its collective written out in forward or
// backward (as the U-Net's workloads/scaffold/model/spatial.cpp wraps the halo exchange).
// Collectives run in float32 whatever the activation's dtype (TensorComm reduces float32/float64),
// converted back afterwards.
#include "workloads/llm_training/tensor_parallel.hpp"

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <utility>

#include "core/error.hpp"
#include "dist/comm_counters.hpp"

namespace scaffold::llm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct TpCapsule : torch::CustomClassHolder {
  explicit TpCapsule(std::shared_ptr<const TensorParallel> t) : tp(std::move(t)) {}
  std::shared_ptr<const TensorParallel> tp;
};

c10::intrusive_ptr<TpCapsule> capsule_of(const std::shared_ptr<const TensorParallel>& tp) {
  SCAFFOLD_CHECK(tp && tp->group && tp->size > 1,
                 "tensor parallelism: a collective without a group");
  return c10::make_intrusive<TpCapsule>(tp);
}

const TensorParallel& tp_of(AutogradContext* ctx) {
  const auto holder = ctx->saved_data.at("tp").toCapsule();
  return *static_cast<const TpCapsule*>(holder.get())->tp;
}

// Adds one collective to the process's counters (dist/comm_counters.hpp).
void count(const std::chrono::steady_clock::time_point& start, int64_t bytes) {
  dist::count_comm(dist::kCommTensorParallel, 1, bytes,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The elementwise sum of x over the group, in x's dtype (reduced in float32).
at::Tensor summed(const at::Tensor& x, const TensorParallel& tp) {
  const auto start = std::chrono::steady_clock::now();
  at::Tensor buf = at::empty(x.sizes(), x.options().dtype(at::kFloat));
  buf.copy_(x);
  tp.group->allreduce_sum(buf)->wait();
  count(start, buf.numel() * 4);
  return buf.scalar_type() == x.scalar_type() ? buf : buf.to(x.scalar_type());
}

// (B, S/t, ...) blocks of every rank -> (B, S, ...), in x's dtype (gathered in float32).
at::Tensor sequence_gathered(const at::Tensor& x, const TensorParallel& tp) {
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor mine = x.to(at::kFloat).contiguous();
  auto sizes = mine.sizes().vec();
  sizes.insert(sizes.begin(), tp.size);
  at::Tensor all = at::empty(sizes, mine.options());  // (t, B, S/t, ...)
  tp.group->all_gather(mine, all)->wait();
  count(start, all.numel() * 4);
  // (t, B, S/t, ...) -> (B, t, S/t, ...) -> (B, S, ...)
  auto out_sizes = x.sizes().vec();
  out_sizes[1] *= tp.size;
  const at::Tensor out = all.transpose(0, 1).reshape(out_sizes);
  return out.scalar_type() == x.scalar_type() ? out : out.to(x.scalar_type());
}

// S/t, the length of one rank's block of x's (B, S, ...) sequence; checks that t divides S.
int64_t sequence_block_length(const at::Tensor& x, const TensorParallel& tp) {
  const int64_t s = x.size(1);
  SCAFFOLD_CHECK(
      s % tp.size == 0,
      fmt::format("sequence parallelism: {} positions do not split into {} blocks", s, tp.size));
  return s / tp.size;
}

// (B, S, ...) -> this rank's (B, S/t, ...) block of the sum over the group.
at::Tensor sequence_reduce_scattered(const at::Tensor& x, const TensorParallel& tp) {
  const int64_t part = sequence_block_length(x, tp);
  const auto start = std::chrono::steady_clock::now();
  auto blocked = x.sizes().vec();  // (B, t, S/t, ...)
  blocked[1] = part;
  blocked.insert(blocked.begin() + 1, tp.size);
  const at::Tensor input =
      x.to(at::kFloat).reshape(blocked).transpose(0, 1).contiguous();  // (t, B, S/t, ...)
  auto out_sizes = x.sizes().vec();
  out_sizes[1] = part;
  at::Tensor out = at::empty(out_sizes, input.options());
  tp.group->reduce_scatter_sum(input, out)->wait();
  count(start, input.numel() * 4);
  return out.scalar_type() == x.scalar_type() ? out : out.to(x.scalar_type());
}

at::Tensor sequence_block(const at::Tensor& x, const TensorParallel& tp) {
  const int64_t part = sequence_block_length(x, tp);
  return x.narrow(1, tp.rank * part, part).contiguous();
}

class ScatterToSequence : public torch::autograd::Function<ScatterToSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& x) {
    const at::Tensor out = sequence_block(x, *capsule->tp);
    ctx->saved_data["tp"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {at::Tensor(), sequence_gathered(grads.at(0), tp_of(ctx))};
  }
};

class GatherFromSequence : public torch::autograd::Function<GatherFromSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& x) {
    const at::Tensor out = sequence_gathered(x, *capsule->tp);
    ctx->saved_data["tp"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {at::Tensor(), sequence_reduce_scattered(grads.at(0), tp_of(ctx))};
  }
};

class ReduceScatterToSequence : public torch::autograd::Function<ReduceScatterToSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& x) {
    const at::Tensor out = sequence_reduce_scattered(x, *capsule->tp);
    ctx->saved_data["tp"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {at::Tensor(), sequence_gathered(grads.at(0), tp_of(ctx))};
  }
};

class CopyToRegion : public torch::autograd::Function<CopyToRegion> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& x) {
    ctx->saved_data["tp"] = at::IValue::make_capsule(std::move(capsule));
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {at::Tensor(), summed(grads.at(0), tp_of(ctx))};
  }
};

class ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
 public:
  static at::Tensor forward(AutogradContext*, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& x) {
    return summed(x, *capsule->tp);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {at::Tensor(), grads.at(0)};
  }
};

// Forward: the per-token loss log(sum_v exp(z_v)) - z_target over the whole vocabulary, from
// each rank's columns: the maximum (for stability) through a sum of one-hot rows, then one
// all-reduce of the target logit and the sum of exponentials. Saves the softmax of this rank's
// columns; backward turns it into softmax - onehot in place (one backward per graph).
class VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
 public:
  // logits (N, V/t) float32; labels (N) int64. capsule null: t = 1.
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<TpCapsule> capsule,
                            const at::Tensor& logits, const at::Tensor& labels) {
    const TensorParallel* tp = capsule ? capsule->tp.get() : nullptr;
    const int64_t n = logits.size(0), local_vocab = logits.size(1);
    const int64_t begin = tp ? tp->rank * local_vocab : 0;
    at::Tensor max = std::get<0>(logits.max(1));  // (N)
    if (tp) {
      at::Tensor rows = at::zeros({tp->size, n}, logits.options());
      rows.select(0, tp->rank).copy_(max);
      max = std::get<0>(summed(rows, *tp).max(0));
    }
    const at::Tensor shifted = logits - max.unsqueeze(1);  // (N, V/t)
    const at::Tensor in_range =
        labels.ge(begin).logical_and(labels.lt(begin + local_vocab));                         // (N)
    const at::Tensor local_target = (labels - begin).masked_fill(in_range.logical_not(), 0);  // (N)
    at::Tensor exp = shifted.exp();
    at::Tensor parts =
        at::stack({shifted.gather(1, local_target.unsqueeze(1)).squeeze(1) * in_range, exp.sum(1)});
    if (tp) parts = summed(parts, *tp);
    const at::Tensor target_logit = parts.select(0, 0), sum_exp = parts.select(0, 1);
    exp.div_(sum_exp.unsqueeze(1));  // the softmax of this rank's columns
    ctx->save_for_backward({exp, local_target, in_range});
    return sum_exp.log() - target_logit;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0];
    const at::Tensor& local_target = saved[1];
    const at::Tensor& in_range = saved[2];
    grad.scatter_add_(1, local_target.unsqueeze(1),
                      in_range.to(grad.scalar_type()).neg().unsqueeze(1));
    grad.mul_(grads.at(0).unsqueeze(1));
    return {at::Tensor(), grad, at::Tensor()};
  }
};

}  // namespace

TensorParallelStats tensor_parallel_stats() {
  const dist::CommCounter c = dist::comm_counter(dist::kCommTensorParallel);
  return {c.seconds, c.calls, c.bytes};
}

std::pair<int64_t, int64_t> shard_range(int64_t total, int size, int rank) {
  SCAFFOLD_CHECK(
      size >= 1 && rank >= 0 && rank < size && total % size == 0,
      fmt::format("tensor parallelism: {} rows do not split into {} equal parts", total, size));
  const int64_t part = total / size;
  return {rank * part, (rank + 1) * part};
}

at::Tensor copy_to_tp_region(const at::Tensor& x, const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return x;
  return CopyToRegion::apply(capsule_of(tp), x);
}

at::Tensor reduce_from_tp_region(const at::Tensor& x,
                                 const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return x;
  return ReduceFromRegion::apply(capsule_of(tp), x);
}

at::Tensor scatter_to_sequence_region(const at::Tensor& x,
                                      const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return x;
  return ScatterToSequence::apply(capsule_of(tp), x);
}

at::Tensor gather_from_sequence_region(const at::Tensor& x,
                                       const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return x;
  return GatherFromSequence::apply(capsule_of(tp), x);
}

at::Tensor reduce_scatter_to_sequence_region(const at::Tensor& x,
                                             const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return x;
  return ReduceScatterToSequence::apply(capsule_of(tp), x);
}

at::Tensor vocab_parallel_embedding(const at::Tensor& tokens, const at::Tensor& weight,
                                    const std::shared_ptr<const TensorParallel>& tp) {
  if (!tp || tp->size == 1) return at::embedding(weight, tokens);
  const int64_t begin = tp->rank * weight.size(0);
  const at::Tensor outside =
      tokens.lt(begin).logical_or(tokens.ge(begin + weight.size(0)));  // (B, S)
  const at::Tensor local = (tokens - begin).masked_fill(outside, 0);
  const at::Tensor rows =
      at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);  // (B, S, h)
  return reduce_from_tp_region(rows, tp);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                        const std::shared_ptr<const TensorParallel>& tp) {
  SCAFFOLD_CHECK(logits.dim() == 2 && labels.dim() == 1 && logits.size(0) == labels.size(0),
                 "vocab-parallel cross-entropy: logits (N, V/t) and labels (N) expected");
  const bool parallel = tp && tp->size > 1;
  return VocabParallelCrossEntropy::apply(
      parallel ? capsule_of(tp) : c10::intrusive_ptr<TpCapsule>(), logits.to(at::kFloat), labels);
}

c10::intrusive_ptr<TiedEmbeddingLink> tied_embedding_link() {
  return c10::make_intrusive<TiedEmbeddingLink>();
}

namespace {

TiedEmbeddingLink& link_of(AutogradContext* ctx) {
  const auto holder = ctx->saved_data.at("link").toCapsule();
  return *static_cast<TiedEmbeddingLink*>(holder.get());
}

// The weight as it is (autograd makes the returned input a view with this node as its grad_fn);
// backward keeps the gradient.
class TiedOutputWeight : public torch::autograd::Function<TiedOutputWeight> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight,
                            c10::intrusive_ptr<TiedEmbeddingLink> link) {
    ctx->saved_data["link"] = at::IValue::make_capsule(std::move(link));
    return weight;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    link_of(ctx).output_layer_gradient = grads.at(0);
    return {at::Tensor(), at::Tensor()};
  }
};

class TiedEmbedding : public torch::autograd::Function<TiedEmbedding> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& tokens,
                            const at::Tensor& weight, c10::intrusive_ptr<TiedEmbeddingLink> link) {
    ctx->saved_data["link"] = at::IValue::make_capsule(std::move(link));
    ctx->saved_data["vocab"] = weight.size(0);
    ctx->save_for_backward({tokens});
    return at::embedding(weight, tokens);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor tokens = ctx->get_saved_variables()[0].reshape({-1});
    const at::Tensor& grad = grads.at(0);
    const at::Tensor rows = grad.reshape({tokens.numel(), grad.size(-1)});  // (N, h)
    TiedEmbeddingLink& link = link_of(ctx);
    at::Tensor weight_grad = std::exchange(link.output_layer_gradient, at::Tensor());
    const int64_t vocab = ctx->saved_data.at("vocab").toInt();
    if (!weight_grad.defined())
      return {at::Tensor(), at::embedding_dense_backward(rows, tokens, vocab, -1, false),
              at::Tensor()};
    // Each token's rows summed from zero in token order (the dense backward's sums), then added
    // to the output layer's gradient row by row, each row once.
    const auto unique = at::_unique(tokens, /*sorted=*/true, /*return_inverse=*/true);
    const at::Tensor& ids = std::get<0>(unique);
    const at::Tensor sums = at::zeros({ids.numel(), rows.size(1)}, rows.options())
                                .index_add_(0, std::get<1>(unique), rows);
    // Added to in place where nothing else can see it; a copy otherwise.
    if (!weight_grad.is_contiguous() || weight_grad.scalar_type() != sums.scalar_type() ||
        weight_grad.use_count() > 1 || weight_grad.storage().use_count() > 1)
      weight_grad = weight_grad.to(sums.options(), /*non_blocking=*/false, /*copy=*/true,
                                   at::MemoryFormat::Contiguous);
    weight_grad.index_add_(0, ids, sums);
    return {at::Tensor(), weight_grad, at::Tensor()};
  }
};

}  // namespace

at::Tensor tied_embedding(const at::Tensor& tokens, const at::Tensor& weight,
                          const c10::intrusive_ptr<TiedEmbeddingLink>& link) {
  return TiedEmbedding::apply(tokens, weight, link);
}

at::Tensor tied_output_weight(const at::Tensor& weight,
                              const c10::intrusive_ptr<TiedEmbeddingLink>& link) {
  return TiedOutputWeight::apply(weight, link);
}

}  // namespace scaffold::llm
