// The FNO's transforms on a grid whose first spatial dimension is split over the ranks of a group
// (CARAML's input sharding, `tp_size`), computing exactly the kept modes of the unsharded
// transform (spectral.hpp) and its inverse:
//   2-D/3-D (pencil transpose): the real FFT along the last axis and the FFTs along the other
//   unsplit axes on the local slab, each truncated to its kept modes; an all-to-all that splits
//   the last kept-mode axis over the ranks and gathers the split grid axis; the FFT along it,
//   truncated. The inverse runs the same steps backwards. Communication is of kept modes only.
//   1-D (no unsplit axis to transpose onto): each rank's partial DFT of its points at the m kept
//   frequencies (a matrix product), summed over the group; the inverse evaluates the kept
//   frequencies at the local points.
// Differentiable: the collectives are autograd functions (all-to-all's backward is the reverse
// all-to-all, a sum's backward is a sum), the rest is LibTorch's own differentiable ops.
// Legend as spectral.hpp; n_0 the local extent of the split axis, P the group's ranks.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "dist/tensor_comm.hpp"

namespace scaffold::fno {

// A contiguous index range [start, start + length).
struct IndexRange {
  int64_t start = 0;
  int64_t length = 0;
};

// Part `index` of `n` items split into `parts` nearly equal contiguous ranges (the first
// n % parts get one more): the grid's split axis over the ranks, and the kept modes' last axis.
IndexRange balanced_range(int64_t n, int parts, int index);

// This rank's place in a sample's shard group. The group's rank i holds part i of the split axis.
struct FftShard {
  std::shared_ptr<dist::TensorComm> group;
  int64_t extent = 0;  // N_0, the whole split axis
  int parts() const { return group ? group->size() : 1; }
  int index() const { return group ? group->rank() : 0; }
  IndexRange local() const { return balanced_range(extent, parts(), index()); }
};

// The part of the last kept-mode axis (m_{d-1} entries) this rank holds after the forward
// transform of a d >= 2 grid; the whole axis for d = 1.
IndexRange mode_range(const std::vector<int64_t>& modes, const FftShard& shard);

// x (B, C, n_0, N_1, ..., N_{d-1}) real, this rank's slab -> the kept modes of the whole grid's
// rfftn, in the distributed layout:
//   d = 1:  (B, C, m_0), every mode on every rank;
//   d >= 2: (B, C, 2 m_0, ..., 2 m_{d-2}, k) with k = mode_range(modes, shard).length.
// Collective over shard.group.
at::Tensor dist_rfft_modes(const at::Tensor& x, const std::vector<int64_t>& modes,
                           const FftShard& shard);

// The inverse: kept modes in the distributed layout (as dist_rfft_modes returns them for
// `modes`, with any channel count) -> (B, C, n_0, N_1, ..., N_{d-1}) real, this rank's slab of
// irfft_modes(kept, grid). `grid` is the whole grid (grid[0] = shard.extent). Collective.
at::Tensor dist_irfft_modes(const at::Tensor& kept, const std::vector<int64_t>& modes,
                            const std::vector<int64_t>& grid, const FftShard& shard);

// The elementwise sum over shard.group with an identity backward: for sums every rank then uses
// identically (the loss's norms), whose gradient w.r.t. each rank's part is the gradient w.r.t.
// the total. Collective.
at::Tensor shard_sum(const at::Tensor& x, const FftShard& shard);

// Process-wide totals of the sharded transforms' communication (forward and backward).
struct DistFftStats {
  int64_t all_to_alls = 0, all_reduces = 0;
  int64_t bytes_sent = 0;  // all-to-all bytes to other ranks; all-reduce buffer bytes
  double seconds = 0.0;    // in the collectives
};
DistFftStats dist_fft_stats();

}  // namespace scaffold::fno
