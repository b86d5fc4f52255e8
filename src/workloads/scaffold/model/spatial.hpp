// Spatial parallelism for the U-Net (docs/distributed.md, DistConv-style): every activation of a
// sample is split in D/H/W across the ranks of its spatial group. The operations that see across a
// shard boundary are autograd functions here: the halo padding in front of each 3^3 convolution,
// the all-reduced GroupNorm statistics (`dc_groupnorm: global`) and the sums of the loss and Dice.
// Pooling, transposed convolution (k 2, s 2), ReLU, the 1^3 head and concatenation need nothing:
// they run on the local shard as they are.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "dist/halo.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/fused_norm.hpp"

namespace scaffold::model {

// dc_groupnorm: `global` all-reduces each group's statistics over the spatial group, so a sharded
// model computes what the unsharded one does; `local` normalises each shard by its own statistics
// (what ScaFFold's DistConv does).
enum class GroupNormMode { Global, Local };
GroupNormMode parse_group_norm_mode(const std::string& value);  // core::Error naming the value
const char* to_string(GroupNormMode mode);

// This rank's place in its sample's spatial group.
struct SpatialContext {
  std::shared_ptr<dist::TensorComm> group;  // the ranks holding the other shards of the sample
  std::array<int, 3> shards{1, 1, 1};       // shard count along D, H, W
  std::array<int, 3> coords{0, 0, 0};       // this rank's shard index along D, H, W
  std::array<dist::HaloNeighbours, 3> neighbours;  // group ranks of the D/H/W neighbours
  GroupNormMode group_norm = GroupNormMode::Global;
  bool sharded(int spatial_dim) const { return shards[static_cast<std::size_t>(spatial_dim)] > 1; }
};

// The context of grid.rank() in `group`, a communicator whose rank i holds shard id i of the
// grid's spatial group (dist::Communicator::split(grid.replica(), grid.shard_id())).
std::shared_ptr<SpatialContext> make_spatial_context(std::shared_ptr<dist::TensorComm> group,
                                                     const dist::ProcessGrid& grid,
                                                     GroupNormMode mode);

// x with `width` neighbour slices added on both sides of spatial dimension d (0, 1, 2 = D, H, W;
// NCDHW dim 2 + d), zeros at the sample's outer boundary. Backward returns the halo gradients to
// their owners. Collective over the spatial group: every rank must call it in the same order.
at::Tensor halo_pad(const at::Tensor& x, int spatial_dim, int64_t width,
                    const std::shared_ptr<const SpatialContext>& ctx);

// conv3d with stride 1 and "same" padding (kernel odd: k/2 on each side), where sharded
// dimensions take their padding from the neighbours (halo_pad) instead of zeros.
//   x (N, Cin, D, H, W) local shard; weight (Cout, Cin, k, k, k); bias (Cout) or undefined.
at::Tensor conv3d_same(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       const std::shared_ptr<const SpatialContext>& ctx);

// GroupNorm whose per-(sample, group) mean and variance are taken over the whole sample: local
// moments are all-reduced over the spatial group (in float64), and so are the per-group gradient
// sums in backward. Runs in weight's dtype (float32), with autocast off.
at::Tensor group_norm_global(const at::Tensor& x, int64_t groups, const at::Tensor& weight,
                             const at::Tensor& bias, double eps,
                             const std::shared_ptr<const SpatialContext>& ctx);

// The statistics all-reduce of the global GroupNorm, shared by group_norm_global and the fused
// GroupNorm + ReLU (kernels/fused_norm.hpp) so both compute the same thing. Inputs are this shard's
// per-(sample, group) mean and Σ (x - local mean)² (N, G) float64 over `local_count` elements;
// count, Σx and Σx² are all-reduced in float64 over the spatial group. Outputs (N, G) float64.
kernels::GroupStatistics global_group_statistics(const at::Tensor& local_mean,
                                                 const at::Tensor& local_m2, double local_count,
                                                 double eps, const SpatialContext& ctx);
// Backward's per-group gradient sums (Σ w·dy and Σ w·dy·x, any float64 tensor) summed over the
// group in place.
void allreduce_group_sums(at::Tensor& sums, const SpatialContext& ctx);
// Both as the fused GroupNorm + ReLU's reduction (kernels/fused_norm.hpp), over ctx's group.
kernels::GroupNormReduction group_norm_reduction(std::shared_ptr<const SpatialContext> ctx);

// Sum over the spatial group with an identity backward: for quantities every rank then uses
// identically (the loss's and Dice's sums), whose gradient w.r.t. each local partial sum is the
// gradient w.r.t. the total (ScaFFold's SpatialAllReduce).
at::Tensor spatial_sum(const at::Tensor& x, const std::shared_ptr<const SpatialContext>& ctx);

}  // namespace scaffold::model
