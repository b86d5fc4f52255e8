#include "dist/halo.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>

#include "core/error.hpp"
#include "dist/comm_counters.hpp"

namespace scaffold::dist {
namespace {
// Message tags relative to the exchange's base tag.
constexpr int kUp = 0;        // forward: a slab sent to the hi neighbour
constexpr int kDown = 1;      // forward: a slab sent to the lo neighbour
constexpr int kGradDown = 2;  // reverse: the lo halo's gradient sent back to the lo neighbour
constexpr int kGradUp = 3;    // reverse: the hi halo's gradient sent back to the hi neighbour

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t held_bytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}
}  // namespace

HaloStats halo_stats() {
  const CommCounter c = comm_counter(kCommHalo);
  return {c.calls, c.bytes, c.seconds};
}

HaloExchange::HaloExchange(TensorComm& comm, HaloNeighbours neighbours, int64_t dim, int64_t width,
                           int tag)
    : comm_(comm), neighbours_(neighbours), dim_(dim), width_(width), tag_(tag) {
  SCAFFOLD_CHECK(width_ >= 1, fmt::format("halo width must be >= 1, got {}", width_));
}

HaloExchange::~HaloExchange() = default;

at::Tensor HaloExchange::slab_shape_like(const at::Tensor& x) const {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes[static_cast<std::size_t>(dim_)] = width_;
  return at::empty(sizes, x.options());
}

void HaloExchange::wait_all() {
  for (auto& w : pending_) w->wait();
  pending_.clear();
  for (const at::Tensor& t : keep_) bytes_ += held_bytes(t);
  keep_.clear();
  count_comm(kCommHalo, 1, bytes_, static_cast<double>(now_ns() - started_ns_) * 1e-9);
  bytes_ = 0;
}

// One exchange with both neighbours, in one batch: the receives first (so a neighbour's send
// finds them posted), then the sends. What goes up to the hi neighbour travels with up_tag, what
// goes down with down_tag; so the lo neighbour's message to us came up, the hi one's came down.
void HaloExchange::post(const at::Tensor& to_lo, const at::Tensor& to_hi, int up_tag,
                        int down_tag) {
  comm_.begin_batch();
  if (neighbours_.lo >= 0) pending_.push_back(comm_.recv(from_lo_, neighbours_.lo, tag_ + up_tag));
  if (neighbours_.hi >= 0)
    pending_.push_back(comm_.recv(from_hi_, neighbours_.hi, tag_ + down_tag));
  if (neighbours_.lo >= 0) {
    keep_.push_back(to_lo.contiguous());
    pending_.push_back(comm_.send(keep_.back(), neighbours_.lo, tag_ + down_tag));
  }
  if (neighbours_.hi >= 0) {
    keep_.push_back(to_hi.contiguous());
    pending_.push_back(comm_.send(keep_.back(), neighbours_.hi, tag_ + up_tag));
  }
  comm_.end_batch();
}

void HaloExchange::start(const at::Tensor& x) {
  started_ns_ = now_ns();
  SCAFFOLD_CHECK(dim_ >= 0 && dim_ < x.dim(),
                 fmt::format("halo dimension {} of a {}-d tensor", dim_, x.dim()));
  const int64_t extent = x.size(dim_);
  if (extent < width_)
    throw core::Error(
        fmt::format("halo exchange along dimension {}: this shard's extent {} is smaller than the "
                    "halo width {} (too many shards for this volume)",
                    dim_, extent, width_));
  // Received halos, or zeros at the sample's outer boundary (nothing to receive there).
  from_lo_ = neighbours_.lo >= 0 ? slab_shape_like(x) : slab_shape_like(x).zero_();
  from_hi_ = neighbours_.hi >= 0 ? slab_shape_like(x) : slab_shape_like(x).zero_();
  // The first slices go down, the last ones up.
  post(x.narrow(dim_, 0, width_), x.narrow(dim_, extent - width_, width_), kUp, kDown);
}

std::pair<at::Tensor, at::Tensor> HaloExchange::finish() {
  wait_all();
  std::pair<at::Tensor, at::Tensor> halos{std::move(from_lo_), std::move(from_hi_)};
  from_lo_ = at::Tensor();
  from_hi_ = at::Tensor();
  return halos;
}

void HaloExchange::start_reverse(const at::Tensor& grad_lo, const at::Tensor& grad_hi) {
  started_ns_ = now_ns();
  // Our hi halo holds the hi neighbour's first slices: its gradient belongs there, and vice versa.
  from_lo_ =
      neighbours_.lo >= 0 ? at::empty_like(grad_lo, at::MemoryFormat::Contiguous) : at::Tensor();
  from_hi_ =
      neighbours_.hi >= 0 ? at::empty_like(grad_hi, at::MemoryFormat::Contiguous) : at::Tensor();
  post(grad_lo, grad_hi, kGradUp, kGradDown);
}

void HaloExchange::finish_reverse(at::Tensor& grad_x) {
  wait_all();
  const int64_t extent = grad_x.size(dim_);
  if (from_lo_.defined()) grad_x.narrow(dim_, 0, width_).add_(from_lo_);
  if (from_hi_.defined()) grad_x.narrow(dim_, extent - width_, width_).add_(from_hi_);
  from_lo_ = at::Tensor();
  from_hi_ = at::Tensor();
}

}  // namespace scaffold::dist
