#include "model/spatial.hpp"

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "model/autocast.hpp"

namespace scaffold::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Base message tag of the halo exchange along spatial dimension d (each uses four tags).
int halo_tag(int spatial_dim) { return 100 + 8 * spatial_dim; }

struct HaloCapsule : torch::CustomClassHolder {
  HaloCapsule(std::shared_ptr<const SpatialContext> c, int d, int64_t w) : ctx(std::move(c)), spatial_dim(d), width(w) {}
  std::shared_ptr<const SpatialContext> ctx;
  int spatial_dim;
  int64_t width;
  dist::HaloExchange exchange() const {
    return dist::HaloExchange(*ctx->group, ctx->neighbours[static_cast<std::size_t>(spatial_dim)], 2 + spatial_dim,
                              width, halo_tag(spatial_dim));
  }
};

class HaloPadFunction : public torch::autograd::Function<HaloPadFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<HaloCapsule> capsule, const at::Tensor& x) {
    const int64_t dim = 2 + capsule->spatial_dim;
    dist::HaloExchange exchange = capsule->exchange();
    exchange.start(x);
    const auto [lo, hi] = exchange.finish();
    ctx->saved_data["halo"] = at::IValue::make_capsule(std::move(capsule));
    return at::cat({lo, x, hi}, dim);
  }

  // The padded tensor's gradient: its middle is x's own; its two halo slabs go back to the
  // neighbours, whose halos of our boundary slices come back and are added in.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("halo").toCapsule();
    const auto& capsule = *static_cast<const HaloCapsule*>(holder.get());
    const int64_t dim = 2 + capsule.spatial_dim;
    const int64_t w = capsule.width;
    const at::Tensor& g = grad_outputs.at(0);
    // Every rank of the group must take part in the exchange, needed here or not.
    SCAFFOLD_CHECK(g.defined(), "halo padding: backward without an output gradient");
    const int64_t extent = g.size(dim) - 2 * w;
    at::Tensor grad_x = g.narrow(dim, w, extent).contiguous();
    dist::HaloExchange exchange = capsule.exchange();
    exchange.start_reverse(g.narrow(dim, 0, w), g.narrow(dim, w + extent, w));
    exchange.finish_reverse(grad_x);
    return {at::Tensor(), grad_x};
  }
};

struct SumCapsule : torch::CustomClassHolder {
  SumCapsule(std::shared_ptr<const SpatialContext> c, bool identity) : ctx(std::move(c)), identity_backward(identity) {}
  std::shared_ptr<const SpatialContext> ctx;
  bool identity_backward;
};

at::Tensor summed_over_group(const at::Tensor& x, dist::TensorComm& group) {
  at::Tensor out = x.contiguous().clone();
  group.allreduce_sum(out)->wait();
  return out;
}

class GroupSumFunction : public torch::autograd::Function<GroupSumFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<SumCapsule> capsule, const at::Tensor& x) {
    at::Tensor out = summed_over_group(x, *capsule->ctx->group);
    ctx->saved_data["sum"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("sum").toCapsule();
    const auto& capsule = *static_cast<const SumCapsule*>(holder.get());
    const at::Tensor& g = grad_outputs.at(0);
    SCAFFOLD_CHECK(g.defined(), "spatial all-reduce: backward without an output gradient");
    return {at::Tensor(), capsule.identity_backward ? g : summed_over_group(g, *capsule.ctx->group)};
  }
};

at::Tensor group_sum(const at::Tensor& x, const std::shared_ptr<const SpatialContext>& ctx, bool identity_backward) {
  SCAFFOLD_CHECK(ctx && ctx->group, "spatial all-reduce without a spatial group");
  return GroupSumFunction::apply(c10::make_intrusive<SumCapsule>(ctx, identity_backward), x);
}

}  // namespace

GroupNormMode parse_group_norm_mode(const std::string& value) {
  if (value == "global") return GroupNormMode::Global;
  if (value == "local") return GroupNormMode::Local;
  throw core::Error(fmt::format("dc_groupnorm: '{}' is not allowed; expected global or local", value));
}

const char* to_string(GroupNormMode mode) { return mode == GroupNormMode::Global ? "global" : "local"; }

std::shared_ptr<SpatialContext> make_spatial_context(std::shared_ptr<dist::TensorComm> group,
                                                     const dist::ProcessGrid& grid, GroupNormMode mode) {
  SCAFFOLD_CHECK(group && group->size() == grid.spatial_size() && group->rank() == grid.shard_id(),
                 fmt::format("spatial group of {} ranks (this one {}) does not match the grid's {} shards (this one {})",
                             group ? group->size() : 0, group ? group->rank() : -1, grid.spatial_size(), grid.shard_id()));
  auto ctx = std::make_shared<SpatialContext>();
  ctx->group = std::move(group);
  ctx->group_norm = mode;
  const auto& shards = grid.num_shards();
  const auto& dims = grid.shard_dims();
  const std::vector<int> coords = grid.shard_coords();
  int stride = 1;  // shard-id distance between neighbours along entry k (row-major)
  for (std::size_t k = shards.size(); k-- > 0;) {
    const int dim = dims[k];
    SCAFFOLD_CHECK(dim >= 2 && dim <= 4, fmt::format("dc_shard_dims entry {} is not a spatial dimension (2, 3 or 4)", dim));
    const auto d = static_cast<std::size_t>(dim - 2);
    if (shards[k] > 1) {
      SCAFFOLD_CHECK(ctx->shards[d] == 1, fmt::format("dc_shard_dims names dimension {} twice", dim));
      ctx->shards[d] = shards[k];
      ctx->coords[d] = coords[k];
      const int id = grid.shard_id();
      ctx->neighbours[d].lo = coords[k] > 0 ? id - stride : -1;
      ctx->neighbours[d].hi = coords[k] + 1 < shards[k] ? id + stride : -1;
    }
    stride *= shards[k];
  }
  return ctx;
}

at::Tensor halo_pad(const at::Tensor& x, int spatial_dim, int64_t width,
                    const std::shared_ptr<const SpatialContext>& ctx) {
  SCAFFOLD_CHECK(ctx && ctx->group, "halo padding without a spatial group");
  SCAFFOLD_CHECK(spatial_dim >= 0 && spatial_dim < 3 && x.dim() == 5,
                 fmt::format("halo padding: spatial dimension {} of a {}-d tensor", spatial_dim, x.dim()));
  return HaloPadFunction::apply(c10::make_intrusive<HaloCapsule>(ctx, spatial_dim, width), x);
}

at::Tensor conv3d_same(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       const std::shared_ptr<const SpatialContext>& ctx) {
  SCAFFOLD_CHECK(weight.dim() == 5 && weight.size(2) % 2 == 1 && weight.size(2) == weight.size(3) &&
                     weight.size(2) == weight.size(4),
                 "conv3d_same: the kernel must be cubic with an odd side");
  const int64_t pad = weight.size(2) / 2;
  std::vector<int64_t> padding(3, pad);
  at::Tensor input = x;
  if (ctx && pad > 0) {
    for (int d = 0; d < 3; ++d) {
      if (!ctx->sharded(d)) continue;
      // Later dimensions' halos include the earlier ones' (the corners come along).
      input = halo_pad(input, d, pad, ctx);
      padding[static_cast<std::size_t>(d)] = 0;
    }
  }
  return at::conv3d(input, weight, bias, /*stride=*/{1, 1, 1}, padding);
}

at::Tensor group_norm_global(const at::Tensor& x_in, int64_t groups, const at::Tensor& weight,
                             const at::Tensor& bias, double eps, const std::shared_ptr<const SpatialContext>& ctx) {
  AutocastGuard autocast_off(AutocastState::current().disabled());
  const at::Tensor x = x_in.scalar_type() == weight.scalar_type() ? x_in : x_in.to(weight.scalar_type());
  const int64_t n = x.size(0), c = x.size(1);
  SCAFFOLD_CHECK(groups >= 1 && c % groups == 0, fmt::format("GroupNorm: {} groups do not divide {} channels", groups, c));
  const at::Tensor xg = x.reshape({n, groups, -1});  // (N, G, local voxels x C/G)
  const auto local_count = static_cast<double>(xg.size(2));
  // Local moments in x's precision (Welford), combined across shards in float64.
  const auto [var, mean] = at::var_mean(xg, {2}, /*unbiased=*/false, /*keepdim=*/false);  // (N, G)
  const at::Tensor m = mean.to(at::kDouble);
  const at::Tensor sums = at::stack({at::full_like(m, local_count), m * local_count,
                                     (var.to(at::kDouble) + m * m) * local_count});  // (3, N, G)
  const at::Tensor total = all_reduce_sum(sums, ctx);
  const at::Tensor count = total.select(0, 0);
  const at::Tensor g_mean = total.select(0, 1) / count;
  const at::Tensor g_var = (total.select(0, 2) / count - g_mean * g_mean).clamp_min(0.0);
  const at::Tensor rstd = (g_var + eps).rsqrt().to(x.scalar_type());  // (N, G)
  // y = x * a + b per (sample, channel): a = rstd * weight, b = bias - mean * a.
  const int64_t per_group = c / groups;
  const at::Tensor a = (rstd.unsqueeze(2) * weight.view({1, groups, per_group})).reshape({n, c});
  const at::Tensor b = bias.view({1, c}) - (g_mean.to(x.scalar_type()).unsqueeze(2).expand({n, groups, per_group})
                                                .reshape({n, c}) * a);
  return at::addcmul(b.view({n, c, 1, 1, 1}), x, a.view({n, c, 1, 1, 1}));
}

at::Tensor all_reduce_sum(const at::Tensor& x, const std::shared_ptr<const SpatialContext>& ctx) {
  return group_sum(x, ctx, /*identity_backward=*/false);
}

at::Tensor spatial_sum(const at::Tensor& x, const std::shared_ptr<const SpatialContext>& ctx) {
  return group_sum(x, ctx, /*identity_backward=*/true);
}

}  // namespace scaffold::model
