#include "workloads/fno/dist_fft.hpp"

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <mutex>
#include <utility>

#include "core/error.hpp"
#include "core/numbers.hpp"
#include "core/timer.hpp"
#include "dist/all_to_all.hpp"
#include "dist/comm_counters.hpp"
#include "workloads/fno/spectral.hpp"

namespace scaffold::fno {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Message tags of the transposes (forward and the backward's reverse exchange).
constexpr int kTagForward = 300;
constexpr int kTagBackward = 301;

struct GroupCapsule : torch::CustomClassHolder {
  GroupCapsule(std::shared_ptr<dist::TensorComm> g, std::vector<int64_t> s, std::vector<int64_t> r)
      : group(std::move(g)), send_counts(std::move(s)), recv_counts(std::move(r)) {}
  std::shared_ptr<dist::TensorComm> group;
  std::vector<int64_t> send_counts, recv_counts;  // elements per group rank (all-to-all only)
};

at::Tensor exchange(dist::TensorComm& group, const at::Tensor& send,
                    const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& recv_counts, int tag) {
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  at::Tensor recv = at::empty({total}, send.options());
  const dist::AllToAllStats before = dist::all_to_all_stats();
  dist::all_to_all(group, send, send_counts, recv, recv_counts, tag);
  const dist::AllToAllStats after = dist::all_to_all_stats();
  dist::count_comm(dist::kCommDistFftAllToAll, 1, after.bytes_sent - before.bytes_sent,
                   after.seconds - before.seconds);
  return recv;
}

// All-to-all of flat buffers; backward sends each received slice's gradient back to its sender.
class AllToAllFunction : public torch::autograd::Function<AllToAllFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<GroupCapsule> capsule,
                            const at::Tensor& send) {
    at::Tensor recv = exchange(*capsule->group, send.contiguous(), capsule->send_counts,
                               capsule->recv_counts, kTagForward);
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(capsule));
    return recv;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("group").toCapsule();
    const auto& capsule = *static_cast<const GroupCapsule*>(holder.get());
    // Every rank of the group must take part in the reverse exchange.
    SCAFFOLD_CHECK(grad_outputs.at(0).defined(), "all-to-all: backward without an output gradient");
    at::Tensor grad = exchange(*capsule.group, grad_outputs[0].contiguous(), capsule.recv_counts,
                               capsule.send_counts, kTagBackward);
    return {at::Tensor(), grad};
  }
};

at::Tensor summed(dist::TensorComm& group, const at::Tensor& x) {
  core::Stopwatch clock;
  at::Tensor out = x.contiguous().clone();
  group.allreduce_sum(out)->wait();
  dist::count_comm(dist::kCommDistFftAllReduce, 1,
                   static_cast<int64_t>(out.numel() * out.element_size()), clock.elapsed_s());
  return out;
}

// Sum over the group; the backward is the sum of the ranks' gradients (every rank's output
// feeds only its own points, so each holds part of the gradient of the shared total).
class AllReduceSumFunction : public torch::autograd::Function<AllReduceSumFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<GroupCapsule> capsule,
                            const at::Tensor& x) {
    at::Tensor out = summed(*capsule->group, x);
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("group").toCapsule();
    const auto& capsule = *static_cast<const GroupCapsule*>(holder.get());
    SCAFFOLD_CHECK(grad_outputs.at(0).defined(), "all-reduce: backward without an output gradient");
    return {at::Tensor(), summed(*capsule.group, grad_outputs[0])};
  }
};

// Sum over the group with the identity as backward (see shard_sum).
class ShardSumFunction : public torch::autograd::Function<ShardSumFunction> {
 public:
  static at::Tensor forward(AutogradContext*, c10::intrusive_ptr<GroupCapsule> capsule,
                            const at::Tensor& x) {
    return summed(*capsule->group, x);
  }
  static variable_list backward(AutogradContext*, variable_list grad_outputs) {
    return {at::Tensor(), grad_outputs.at(0)};
  }
};

// The all-to-all of `pieces` (one complex tensor per group rank, any shapes) into tensors of
// `recv_shapes` (one per rank): autograd-tracked, complex values sent as (re, im) float pairs.
std::vector<at::Tensor> exchange_pieces(const std::vector<at::Tensor>& pieces,
                                        const std::vector<std::vector<int64_t>>& recv_shapes,
                                        const FftShard& shard) {
  std::vector<at::Tensor> flat;
  std::vector<int64_t> send_counts, recv_counts;
  for (const at::Tensor& p : pieces) {
    flat.push_back(at::view_as_real(p).reshape({-1}));
    send_counts.push_back(flat.back().numel());
  }
  for (const auto& s : recv_shapes) {
    int64_t n = 2;
    for (int64_t e : s) n *= e;
    recv_counts.push_back(n);
  }
  const at::Tensor recv = AllToAllFunction::apply(
      c10::make_intrusive<GroupCapsule>(shard.group, send_counts, recv_counts), at::cat(flat));
  std::vector<at::Tensor> out;
  int64_t at_elem = 0;
  for (std::size_t q = 0; q < recv_shapes.size(); ++q) {
    std::vector<int64_t> shape = recv_shapes[q];
    shape.push_back(2);
    out.push_back(at::view_as_complex(recv.narrow(0, at_elem, recv_counts[q]).view(shape)));
    at_elem += recv_counts[q];
  }
  return out;
}

// 1-D: the kept frequencies k < m at this rank's points x = start .. start + n - 1 of N.
// Forward basis (n, 2m): [cos(2 pi k x / N) | -sin(2 pi k x / N)], so a real row times it gives
// the partial DFT's (re | im). Inverse basis (2m, n): irfft's weights c_k / N (c_0 = 1, c_k = 2,
// c_{N/2} = 1) on the real parts, -c_k / N on the sines; sin(0) = sin(pi x) = 0 drops the
// imaginary parts of the DC and Nyquist terms as irfft does. Built in float64, used in float32.
at::Tensor dft_basis(int64_t m, int64_t n_global, IndexRange local, bool inverse,
                     const at::TensorOptions& opts) {
  const at::Tensor x =
      at::arange(local.start, local.start + local.length, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor k = at::arange(m, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor phase =
      at::outer(x, k) * (2.0 * core::kPi / static_cast<double>(n_global));  // (n, m)
  if (!inverse) return at::cat({at::cos(phase), -at::sin(phase)}, 1).to(opts);
  at::Tensor c = at::full({m}, 2.0, at::TensorOptions().dtype(at::kDouble));
  c[0] = 1.0;
  if (n_global % 2 == 0 && m > n_global / 2) c[n_global / 2] = 1.0;
  c /= static_cast<double>(n_global);
  return at::cat({(at::cos(phase) * c).t(), -(at::sin(phase) * c).t()}, 0).to(opts);
}

void check_shard(const at::Tensor& x, const FftShard& shard, int64_t grid_dims) {
  SCAFFOLD_CHECK(shard.group != nullptr, "distributed FFT without a shard group");
  SCAFFOLD_CHECK(x.dim() == grid_dims + 2,
                 fmt::format("distributed FFT: a {}-d tensor for a {}-d grid", x.dim(), grid_dims));
}

}  // namespace

IndexRange balanced_range(int64_t n, int parts, int index) {
  SCAFFOLD_CHECK(parts >= 1 && index >= 0 && index < parts,
                 fmt::format("part {} of {}", index, parts));
  const int64_t base = n / parts, extra = n % parts;
  const int64_t start = index * base + std::min<int64_t>(index, extra);
  return {start, base + (index < extra ? 1 : 0)};
}

IndexRange mode_range(const std::vector<int64_t>& modes, const FftShard& shard) {
  if (modes.size() == 1) return {0, modes[0]};
  return balanced_range(modes.back(), shard.parts(), shard.index());
}

at::Tensor dist_rfft_modes(const at::Tensor& x, const std::vector<int64_t>& modes,
                           const FftShard& shard) {
  const auto d = static_cast<int64_t>(modes.size());
  check_shard(x, shard, d);
  const IndexRange local = shard.local();
  SCAFFOLD_CHECK(
      x.size(2) == local.length,
      fmt::format("distributed FFT: rank {} holds {} points of the split axis, expected {} of {}",
                  shard.index(), x.size(2), local.length, shard.extent));
  if (d == 1) {
    const int64_t b = x.size(0), c = x.size(1), m = modes[0];
    const at::Tensor basis =
        dft_basis(m, shard.extent, local, /*inverse=*/false, x.options());  // (n, 2m)
    const at::Tensor partial =
        at::matmul(x, basis).view({b, c, 2, m}).permute({0, 1, 3, 2}).contiguous();
    const at::Tensor total = AllReduceSumFunction::apply(
        c10::make_intrusive<GroupCapsule>(shard.group, std::vector<int64_t>{},
                                          std::vector<int64_t>{}),
        partial);
    return at::view_as_complex(total);  // (B, C, m)
  }
  // The unsplit axes on the local slab, truncated as soon as each is done.
  at::Tensor y = keep_low(at::fft_rfft(x, c10::nullopt, d + 1), d + 1, modes.back());
  for (int64_t i = d - 2; i >= 1; --i)
    y = keep_corners(at::fft_fft(y, c10::nullopt, 2 + i), 2 + i,
                     modes[static_cast<std::size_t>(i)]);
  // Transpose: rank q gets its part of the last mode axis from every rank's slab.
  const int parts = shard.parts();
  std::vector<at::Tensor> pieces;
  std::vector<std::vector<int64_t>> recv_shapes;
  const IndexRange mine = mode_range(modes, shard);
  for (int q = 0; q < parts; ++q) {
    const IndexRange kq = balanced_range(modes.back(), parts, q);
    pieces.push_back(y.narrow(d + 1, kq.start, kq.length));
    std::vector<int64_t> shape = y.sizes().vec();
    shape[2] = balanced_range(shard.extent, parts, q).length;
    shape[static_cast<std::size_t>(d + 1)] = mine.length;
    recv_shapes.push_back(shape);
  }
  y = at::cat(exchange_pieces(pieces, recv_shapes, shard), 2);  // (B, C, N_0, ..., k)
  return keep_corners(at::fft_fft(y, c10::nullopt, 2), 2, modes[0]);
}

at::Tensor dist_irfft_modes(const at::Tensor& kept, const std::vector<int64_t>& modes,
                            const std::vector<int64_t>& grid, const FftShard& shard) {
  const auto d = static_cast<int64_t>(grid.size());
  check_shard(kept, shard, d);
  SCAFFOLD_CHECK(grid[0] == shard.extent && modes.size() == grid.size(),
                 fmt::format("distributed inverse FFT: grid axis 0 is {}, the shard's {}", grid[0],
                             shard.extent));
  const IndexRange local = shard.local();
  if (d == 1) {
    const int64_t b = kept.size(0), c = kept.size(1), m = kept.size(2);
    const at::Tensor basis = dft_basis(m, shard.extent, local, /*inverse=*/true,
                                       at::TensorOptions().dtype(at::kFloat).device(kept.device()));
    // (B, C, m) complex -> (B, C, 2m) as (re... | im...), then evaluated at this rank's points.
    const at::Tensor ri = at::view_as_real(kept).permute({0, 1, 3, 2}).reshape({b, c, 2 * m});
    return at::matmul(ri, basis);  // (B, C, n_0)
  }
  // The split axis: the inverse FFT on the gathered modes, then back to slabs.
  at::Tensor y =
      at::fft_ifft(place_corners(kept, 2, grid[0]), c10::nullopt, 2);  // (B, C, N_0, ..., k)
  const int parts = shard.parts();
  std::vector<at::Tensor> pieces;
  std::vector<std::vector<int64_t>> recv_shapes;
  for (int q = 0; q < parts; ++q) {
    const IndexRange gq = balanced_range(shard.extent, parts, q);
    pieces.push_back(y.narrow(2, gq.start, gq.length));
    std::vector<int64_t> shape = y.sizes().vec();
    shape[2] = local.length;
    shape[static_cast<std::size_t>(d + 1)] = balanced_range(modes.back(), parts, q).length;
    recv_shapes.push_back(shape);
  }
  y = at::cat(exchange_pieces(pieces, recv_shapes, shard), d + 1);  // (B, C, n_0, ..., m_{d-1})
  for (int64_t i = 1; i + 1 < d; ++i)
    y = at::fft_ifft(place_corners(y, 2 + i, grid[static_cast<std::size_t>(i)]), c10::nullopt,
                     2 + i);
  const int64_t n_last = grid.back();
  return at::fft_irfft(place_low(y, d + 1, n_last / 2 + 1), n_last, d + 1);
}

at::Tensor shard_sum(const at::Tensor& x, const FftShard& shard) {
  if (!shard.group || shard.group->size() == 1) return x;
  return ShardSumFunction::apply(c10::make_intrusive<GroupCapsule>(
                                     shard.group, std::vector<int64_t>{}, std::vector<int64_t>{}),
                                 x);
}

DistFftStats dist_fft_stats() {
  const dist::CommCounter a = dist::comm_counter(dist::kCommDistFftAllToAll);
  const dist::CommCounter r = dist::comm_counter(dist::kCommDistFftAllReduce);
  DistFftStats s;
  s.all_to_alls = a.calls;
  s.all_reduces = r.calls;
  s.bytes_sent = a.bytes + r.bytes;
  s.seconds = a.seconds + r.seconds;
  return s;
}

}  // namespace scaffold::fno
