// Halo exchange along one dimension of a spatially sharded tensor (docs/distributed.md),
// split-phase so a caller can overlap it with interior work: start() posts the receives, packs the
// boundary slabs and sends them; finish() waits and hands back the halos. The reverse exchange
// returns the halos' gradients to the ranks that own those voxels, which add them into their
// boundary slabs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dist/tensor_comm.hpp"

namespace scaffold::dist {

// The group ranks holding the neighbouring shards along one dimension; -1 at the outer boundary.
struct HaloNeighbours {
  int lo = -1;  // the shard before this one (smaller indices)
  int hi = -1;  // the shard after this one
};

// Process-wide totals of the halo exchanges (forward and reverse): for reports and benchmarks.
struct HaloStats {
  int64_t exchanges = 0;  // start()..finish() and start_reverse()..finish_reverse() pairs
  int64_t bytes_sent = 0;
  double seconds = 0.0;  // from each start until its messages are done: pack, transfer, wait
};
HaloStats halo_stats();

class HaloExchange {
 public:
  // `tag` and tag+1..tag+3 are used for this exchange's messages; every rank of the group must run
  // the same exchanges in the same order.
  HaloExchange(TensorComm& comm, HaloNeighbours neighbours, int64_t dim, int64_t width, int tag);
  ~HaloExchange();
  HaloExchange(const HaloExchange&) = delete;
  HaloExchange& operator=(const HaloExchange&) = delete;

  // Forward. x: any shape with x.size(dim) >= width (core::Error otherwise).
  void start(const at::Tensor& x);
  // (lo halo, hi halo): the lo neighbour's last `width` slices and the hi neighbour's first ones,
  // zeros at an outer boundary; x's shape with `width` along dim, x's dtype and device.
  std::pair<at::Tensor, at::Tensor> finish();

  // Backward. grad_lo, grad_hi: the gradients of the halos finish() returned (same shapes).
  void start_reverse(const at::Tensor& grad_lo, const at::Tensor& grad_hi);
  // Adds the neighbours' halo gradients into grad_x's first / last `width` slices, in place.
  void finish_reverse(at::Tensor& grad_x);

 private:
  at::Tensor slab_shape_like(const at::Tensor& x) const;
  void post(const at::Tensor& to_lo, const at::Tensor& to_hi, int up_tag, int down_tag);
  void wait_all();

  TensorComm& comm_;
  HaloNeighbours neighbours_;
  int64_t dim_;
  int64_t width_;
  int tag_;
  std::vector<std::unique_ptr<Work>> pending_;
  std::vector<at::Tensor> keep_;  // packed slabs in flight
  // Forward: the halos (zeros at an outer boundary). Reverse: the neighbours' halo gradients
  // (undefined at an outer boundary).
  at::Tensor from_lo_, from_hi_;
  int64_t started_ns_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace scaffold::dist
