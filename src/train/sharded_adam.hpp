// AdamW with its state sharded over the data-parallel group (Megatron's
// --use-distributed-optimizer, ZeRO stage 1): the parameters, flattened in registration order, are
// cut into DP contiguous slices of ceil(N / DP) elements (the last one shorter) and data-parallel
// rank r owns slice r. Each rank keeps exp_avg and exp_avg_sq of its own slice only, updates only
// that slice (torch::optim::AdamW's arithmetic, element for element), then the updated slices
// are all-gathered so every rank holds the whole model, chunk by chunk of the slices (the chunk
// bounds the extra memory; the last slice is padded). The gradients are reduce-scattered over the
// group the same way (reduce_scatter_gradients, which the loop calls instead of its bucketed
// all-reduce): each rank receives only its slice of the sum, half the traffic of an all-reduce.
// Checkpoints hold this rank's slice and the slicing (DP size, rank, element count); loading a
// shard of another slicing is refused.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dist/tensor_comm.hpp"
#include "kernels/fused_adam.hpp"

namespace scaffold::train {

// An optimizer whose state differs from rank to rank: the loop then saves and loads one
// checkpoint file per rank (train/loop.hpp).
class ShardedOptimizer : public torch::optim::Optimizer {
 public:
  using torch::optim::Optimizer::Optimizer;
  // Bytes of optimizer state this rank holds.
  virtual int64_t state_bytes() const = 0;
  // Whether it reduces the gradients itself (reduce_scatter_gradients), replacing the loop's
  // data-parallel all-reduce; the size of its data-parallel group.
  virtual bool reduces_gradients() const { return false; }
  virtual int data_parallel_size() const { return 1; }
  // Sums every parameter's gradient over the data-parallel group, times `scale`, leaving each
  // rank its slice only: inside the slice the reduced values, zeros elsewhere (so sums of
  // squares over all ranks count each element once). Collective over the group.
  virtual void reduce_scatter_gradients(double scale) { static_cast<void>(scale); }
};

// GradientScaling: the clip factor (train::scale_gradients) is applied to this rank's slice in
// the step, not to every element of the gradients first.
class ShardedAdamW : public ShardedOptimizer, public kernels::GradientScaling {
 public:
  static constexpr int64_t kGatherChunk = int64_t{1} << 22;  // elements (16 MiB of float32)

  // groups: AdamWOptions per group (amsgrad is not supported). comm: the data-parallel group;
  // null or one rank: an unsharded AdamW. gather_chunk: elements per all-reduce of the gather.
  // fused: the slices of CPU parameters updated in one pass (kernels/fused_adam.hpp's
  // adamw_update); false, or on another device, LibTorch's AdamW operations on the slices.
  ShardedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
               torch::optim::AdamWOptions defaults, std::shared_ptr<dist::TensorComm> comm,
               int64_t gather_chunk = kGatherChunk, bool fused = true);

  at::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  int64_t state_bytes() const override;
  bool reduces_gradients() const override { return dp_size_ > 1; }
  int data_parallel_size() const override { return dp_size_; }
  void reduce_scatter_gradients(double scale) override;

  int64_t shard_begin() const { return begin_; }  // this rank's slice of the flattened parameters
  int64_t shard_end() const { return end_; }
  int64_t total_elements() const { return total_; }

 private:
  // The part of one parameter inside this rank's slice.
  struct Segment {
    std::size_t group = 0;
    at::Tensor param;      // the whole parameter
    int64_t param_offset;  // first element of the segment in param.view(-1)
    int64_t shard_offset;  // its position in this rank's state tensors
    int64_t numel;
    int64_t step = 0;  // AdamW's per-parameter step count
  };
  void gather_parameters();
  // Copies the flattened parameters' (or, with `grads`, their gradients') elements [lo, hi) into
  // `buffer` (its element 0 at flat element lo), or from it back.
  void copy_flat(int64_t lo, int64_t hi, const at::Tensor& buffer, bool into_buffer,
                 bool grads = false) const;

  std::shared_ptr<dist::TensorComm> comm_;
  int dp_size_ = 1, dp_rank_ = 0;
  int64_t total_ = 0, begin_ = 0, end_ = 0;
  int64_t block_ = 0;  // elements per rank's slice: ceil(total_ / DP)
  int64_t gather_chunk_ = kGatherChunk;
  bool fused_ = true;
  std::vector<std::pair<at::Tensor, int64_t>> flat_;  // every parameter, its first flat element
  std::vector<Segment> segments_;
  at::Tensor exp_avg_, exp_avg_sq_;  // (end_ - begin_) float32
};

// Bytes of exp_avg and exp_avg_sq held by any optimizer's torch state (an unsharded AdamW's).
int64_t adam_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace scaffold::train
