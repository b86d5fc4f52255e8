// Helpers of the spatial-parallel MPI tests: the process grid and spatial group of a layout,
// torch.chunk-style local slices of a full tensor, and norm-wise relative error.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <memory>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "mpi_test_main.hpp"
#include "workloads/scaffold/model/spatial.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold::test {

// A world split into spatial groups of `shards` (D, H, W) with a TensorComm over each group.
struct SpatialSetup {
  SpatialSetup(std::array<int, 3> shards, model::GroupNormMode mode = model::GroupNormMode::Global)
      : grid(world().size(), world().rank(), {shards[0], shards[1], shards[2]}, {2, 3, 4}),
        group_comm(world().split(grid.replica(), grid.shard_id())),
        group(dist::make_mpi_tensor_comm(*group_comm)),
        ctx(model::make_spatial_context(group, grid, mode)) {}
  dist::ProcessGrid grid;
  std::unique_ptr<dist::Communicator> group_comm;
  std::shared_ptr<dist::TensorComm> group;
  std::shared_ptr<model::SpatialContext> ctx;
};

// This rank's part of a full NCDHW tensor (or NDHW when `first_spatial` is 1), cut like
// torch.chunk along each sharded dimension: chunks of ceil(size / n), the last one shorter.
inline at::Tensor local_slice(const at::Tensor& full, const model::SpatialContext& ctx,
                              int64_t first_spatial = 2) {
  at::Tensor t = full;
  for (int d = 0; d < 3; ++d) {
    const int n = ctx.shards[static_cast<std::size_t>(d)];
    if (n == 1) continue;
    const int64_t dim = first_spatial + d;
    const int64_t size = full.size(dim);
    const int64_t chunk = (size + n - 1) / n;
    const int64_t start = chunk * ctx.coords[static_cast<std::size_t>(d)];
    t = t.narrow(dim, start, std::min(chunk, size - start));
  }
  return t.contiguous();
}

// max |a - b| / max |b| (0 when both are zero).
inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// A 2-layer U-Net of base 8 (GroupNorm 4 groups) for 3-channel 16^3 inputs: small and quick.
inline model::UNetOptions small_unet(int n_classes) {
  model::UNetOptions o;
  o.in_channels = 3;
  o.n_classes = n_classes;
  o.layers = 2;
  o.base_channels = 8;
  o.group_norm_groups = 4;
  return o;
}

// The elementwise sum of `t` over the TensorComm's group.
inline at::Tensor group_sum(dist::TensorComm& comm, const at::Tensor& t) {
  at::Tensor out = t.contiguous().clone();
  comm.allreduce_sum(out)->wait();
  return out;
}

}  // namespace scaffold::test
