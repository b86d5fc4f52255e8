// Megatron-LM's tensor parallelism (Shoeybi et al. 2019) as autograd functions over a
// dist::TensorComm of consecutive ranks: f (copy_to_tp_region: identity forward, gradient
// all-reduced backward) in front of column-parallel linears, g (reduce_from_tp_region: all-reduce
// forward, identity backward) after row-parallel ones, the vocabulary-parallel embedding and the
// vocabulary-parallel cross-entropy. Sequence parallelism (Korthikanti et al. 2022, Megatron's
// --sequence-parallel) splits the activations outside the linears along the sequence: its
// functions gather the sequence in front of column-parallel linears (reduce-scatter backward)
// and reduce-scatter it after row-parallel ones (all-gather backward). With a group of one, every
// function is the plain operation and nothing is communicated. Pipeline stages are in
// pipeline.hpp (docs/llm.md).
// Legend: B batch, S sequence, h hidden, V padded vocabulary, t tensor-parallel size.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "dist/tensor_comm.hpp"

namespace scaffold::llm {

// This rank's place in its tensor-parallel group.
struct TensorParallel {
  std::shared_ptr<dist::TensorComm> group;  // the t consecutive ranks; null when t = 1
  int size = 1;                             // t
  int rank = 0;                             // this rank in the group
};

// Time this process spent in the tensor-parallel collectives (all-reduces; with sequence
// parallelism all-gathers and reduce-scatters), forward and backward, cumulative;
// read between steps (autograd on the CPU runs on the calling thread).
struct TensorParallelStats {
  double seconds = 0.0;
  int64_t calls = 0;
  int64_t bytes = 0;  // float32 bytes of the whole (reduced, gathered or scattered) tensors
};
TensorParallelStats tensor_parallel_stats();

// The block [begin, end) of `total` rows (or columns) that `rank` holds when they are split in
// `size` equal parts; SCAFFOLD_CHECK that `size` divides `total`.
std::pair<int64_t, int64_t> shard_range(int64_t total, int size, int rank);

// Megatron's f: identity forward; backward all-reduces the gradient over the group.
at::Tensor copy_to_tp_region(const at::Tensor& x, const std::shared_ptr<const TensorParallel>& tp);

// Megatron's g: forward all-reduces (sums) the partial results over the group; identity backward.
at::Tensor reduce_from_tp_region(const at::Tensor& x,
                                 const std::shared_ptr<const TensorParallel>& tp);

// Sequence parallelism, on (B, S, ...) activations split along dimension 1 in t equal blocks,
// rank r holding block r:
// the rank's block of the whole sequence; backward all-gathers the gradient.
at::Tensor scatter_to_sequence_region(const at::Tensor& x,
                                      const std::shared_ptr<const TensorParallel>& tp);
// (B, S/t, ...) -> (B, S, ...) all-gathered; backward reduce-scatters (sums) the gradient.
at::Tensor gather_from_sequence_region(const at::Tensor& x,
                                       const std::shared_ptr<const TensorParallel>& tp);
// (B, S, ...) partial sums -> (B, S/t, ...) this rank's block of their sum; backward
// all-gathers the gradient.
at::Tensor reduce_scatter_to_sequence_region(const at::Tensor& x,
                                             const std::shared_ptr<const TensorParallel>& tp);

// The vocabulary-parallel embedding: weight (V/t, h) holds the rows of vocabulary ids
// [rank*V/t, (rank+1)*V/t); tokens (B, S) int64 over the whole vocabulary. Each rank looks up the
// ids it holds (zeros elsewhere) and g sums them: (B, S, h), the same on every rank.
at::Tensor vocab_parallel_embedding(const at::Tensor& tokens, const at::Tensor& weight,
                                    const std::shared_ptr<const TensorParallel>& tp);

// The vocabulary-parallel cross-entropy: logits (N, V/t) this rank's vocabulary columns, labels
// (N) int64 over the whole vocabulary -> (N) per-token loss, in float32, identical on every rank
// of the group. The maximum, the sum of exponentials and the target logit are combined across
// the group; backward (softmax minus the one-hot target, on this rank's columns) needs no
// communication.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                        const std::shared_ptr<const TensorParallel>& tp);

// The tied token embedding's gradient as one tensor, where the embedding and the output layer are
// in one graph (one rank of tensor parallelism, one pipeline stage). Autograd would sum the
// output layer's weight gradient and the embedding's (a dense (V, h) tensor of zeros holding the
// looked-up rows' gradients) into a third (V, h) tensor: two passes over the 154 MB of a GPT-2
// weight per step, and two such tensors more at the peak. Here the output layer's product takes
// its weight through tied_output_weight(weight, link), whose backward keeps the product's weight
// gradient in `link` and hands autograd none; tied_embedding(tokens, weight, link) looks the rows
// up, and its backward adds the rows' gradients (each token's summed first, in token order, from
// zero, as the dense backward does) into the kept tensor, which becomes the weight's only
// gradient: the same sums as autograd's, without the two passes. The output layer's backward
// always runs first (the embedding's output feeds it). Without a kept gradient (the output layer
// not in this backward) the embedding's gradient is the dense one.
struct TiedEmbeddingLink : torch::CustomClassHolder {
  at::Tensor output_layer_gradient;  // (V, h), kept by the output weight's backward
};
c10::intrusive_ptr<TiedEmbeddingLink> tied_embedding_link();
at::Tensor tied_embedding(const at::Tensor& tokens, const at::Tensor& weight,
                          const c10::intrusive_ptr<TiedEmbeddingLink>& link);
at::Tensor tied_output_weight(const at::Tensor& weight,
                              const c10::intrusive_ptr<TiedEmbeddingLink>& link);

}  // namespace scaffold::llm
