#include "workloads/fno/fno.hpp"

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "kernels/dnnl_linear.hpp"
#include "nn/autocast.hpp"

namespace scaffold::fno {
namespace {

// GELU whose backward hands gelu_backward a contiguous gradient: LibTorch 1.13's float32 CPU
// gelu_backward returns wrong values (zeros, garbage) for a non-contiguous grad_output, which the
// channel products' backward produces (measured here and with Debian's python3-torch; float64
// is right).
class GeluFunction : public torch::autograd::Function<GeluFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return at::gelu(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {at::gelu_backward(grad_outputs.at(0).contiguous(), x.contiguous())};
  }
};

// The points of one tile of the fused projection: its (P, T) activations stay in cache (512 KiB
// in float32 whatever P is).
int64_t projection_tile(int64_t p) {
  return std::max<int64_t>(64, (int64_t{1} << 17) / std::max<int64_t>(p, 1));
}

// A bias as ProjectionFunction takes it: autograd functions take no undefined tensors, so "no
// bias" is an empty tensor.
at::Tensor bias_or_empty(const at::Tensor& bias, const at::Tensor& weight) {
  return bias.defined() ? bias : at::empty({0}, weight.options());
}

// (P) -> (P, 1) for addmm, or an undefined tensor for none (empty).
at::Tensor column(const at::Tensor& bias) {
  return bias.numel() > 0 ? bias.view({-1, 1}) : at::Tensor();
}

at::Tensor affine(const at::Tensor& w, const at::Tensor& bias_column, const at::Tensor& x) {
  return bias_column.defined() ? at::addmm(bias_column, w, x) : at::mm(w, x);
}

// y = W2 gelu(W1 x + b1) + b2 over the channels of x (B, C, N), a tile of points at a time: the
// (B, P, N) activations are never stored; backward recomputes each tile's (one more product
// than autograd's path) and accumulates the weight gradients tile by tile.
class ProjectionFunction : public torch::autograd::Function<ProjectionFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                            const at::Tensor& b2) {
    const at::Tensor x = x_in.contiguous();
    ctx->save_for_backward({x, w1, b1, w2, b2});
    const int64_t b = x.size(0), n = x.size(2), tile = projection_tile(w1.size(0));
    at::Tensor y = at::empty({b, w2.size(0), n}, x.options());
    const at::Tensor c1 = column(b1), c2 = column(b2);
    for (int64_t e = 0; e < b; ++e)
      for (int64_t p0 = 0; p0 < n; p0 += tile) {
        const int64_t t = std::min(tile, n - p0);
        const at::Tensor g = at::gelu(affine(w1, c1, x[e].narrow(1, p0, t)));
        y[e].narrow(1, p0, t).copy_(affine(w2, c2, g));
      }
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w1 = saved[1], &b1 = saved[2], &w2 = saved[3], &b2 = saved[4];
    const at::Tensor gy_all = grad_outputs.at(0).contiguous();
    const int64_t b = x.size(0), n = x.size(2), tile = projection_tile(w1.size(0));
    at::Tensor dx = at::empty_like(x), dw1 = at::zeros_like(w1), dw2 = at::zeros_like(w2);
    at::Tensor db1 = b1.numel() > 0 ? at::zeros_like(b1) : at::Tensor();
    at::Tensor db2 = b2.numel() > 0 ? at::zeros_like(b2) : at::Tensor();
    const at::Tensor c1 = column(b1), w1t = w1.t(), w2t = w2.t();
    for (int64_t e = 0; e < b; ++e)
      for (int64_t p0 = 0; p0 < n; p0 += tile) {
        const int64_t t = std::min(tile, n - p0);
        const at::Tensor xt = x[e].narrow(1, p0, t), gy = gy_all[e].narrow(1, p0, t);
        const at::Tensor h = affine(w1, c1, xt);  // (P, T), recomputed
        const at::Tensor g = at::gelu(h);
        dw2.addmm_(gy, g.t());
        if (db2.defined()) db2.add_(gy.sum(1));
        const at::Tensor dh = at::gelu_backward(at::mm(w2t, gy), h);
        dw1.addmm_(dh, xt.t());
        if (db1.defined()) db1.add_(dh.sum(1));
        dx[e].narrow(1, p0, t).copy_(at::mm(w1t, dh));
      }
    return {dx, dw1, db1, dw2, db2};
  }
};

// y = act(W x + b + s) over the channels of x (B, C, N), s (B, Co, N) the spectral branch: one
// pre-activation buffer (s + b, then the product accumulated into it per example), the GELU
// reading it; backward: the GELU's gradient once, then the products per example on contiguous
// slices (no broadcast matmul, whose reshapes copy). act: GELU when `gelu` is 1, none when 0.
class PointwiseFunction : public torch::autograd::Function<PointwiseFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& w, const at::Tensor& bias, const at::Tensor& s,
                            int64_t gelu) {
    const at::Tensor x = x_in.contiguous();
    at::Tensor h =
        bias.numel() > 0 ? s.add(bias.view({1, -1, 1})) : s.clone(at::MemoryFormat::Contiguous);
    for (int64_t e = 0; e < x.size(0); ++e) h[e].addmm_(w, x[e]);
    ctx->saved_data["gelu"] = gelu;
    ctx->saved_data["bias"] = bias.numel() > 0;
    if (gelu == 0) {
      ctx->save_for_backward({x, w});
      return h;
    }
    ctx->save_for_backward({x, w, h});
    return at::gelu(h);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor gy = grad_outputs.at(0).contiguous();
    const at::Tensor dh =
        ctx->saved_data["gelu"].toInt() != 0 ? at::gelu_backward(gy, saved[2]) : gy;
    at::Tensor dx = at::empty_like(x), dw = at::zeros_like(w);
    const at::Tensor wt = w.t();
    for (int64_t e = 0; e < x.size(0); ++e) {
      dw.addmm_(dh[e], x[e].t());
      at::Tensor dx_e = dx[e];
      at::mm_out(dx_e, wt, dh[e]);
    }
    const at::Tensor db =
        ctx->saved_data["bias"].toBool() ? dh.sum(at::IntArrayRef{0, 2}) : at::Tensor();
    return {dx, dw, db, dh, at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_pointwise(const at::Tensor& x, const torch::nn::LinearImpl& linear,
                           const at::Tensor& add, bool gelu) {
  const int64_t b = x.size(0), c = x.size(1);
  const at::Tensor& w = linear.weight;
  SCAFFOLD_CHECK(w.size(1) == c && add.size(0) == b && add.size(1) == w.size(0) &&
                     add.numel() == b * w.size(0) * (x.numel() / std::max<int64_t>(b * c, 1)),
                 fmt::format("fused_pointwise: input {}, weight ({}, {}), added {}",
                             c10::str(x.sizes()), w.size(0), w.size(1), c10::str(add.sizes())));
  std::vector<int64_t> shape = x.sizes().vec();
  shape[1] = w.size(0);
  return PointwiseFunction::apply(x.reshape({b, c, -1}), w, bias_or_empty(linear.bias, w),
                                  add.reshape({b, w.size(0), -1}), gelu ? 1 : 0)
      .view(shape);
}

at::Tensor fused_projection(const at::Tensor& x, const torch::nn::LinearImpl& first,
                            const torch::nn::LinearImpl& second) {
  const int64_t b = x.size(0), c = x.size(1);
  SCAFFOLD_CHECK(first.weight.size(1) == c && second.weight.size(1) == first.weight.size(0),
                 fmt::format("fused_projection: {} channels for ({}, {}) and ({}, {}) weights", c,
                             first.weight.size(0), first.weight.size(1), second.weight.size(0),
                             second.weight.size(1)));
  std::vector<int64_t> shape = x.sizes().vec();
  shape[1] = second.weight.size(0);
  return ProjectionFunction::apply(x.reshape({b, c, -1}), first.weight,
                                   bias_or_empty(first.bias, first.weight), second.weight,
                                   bias_or_empty(second.bias, second.weight))
      .view(shape);
}

bool projection_is_fused(const FnoOptions& o, bool on_cpu, bool autocast) {
  return o.fused_projection && o.projection_layers <= 2 && on_cpu && !autocast;
}

bool pointwise_is_fused(const FnoOptions& o, bool on_cpu, bool autocast) {
  return o.fused_pointwise && on_cpu && !autocast;
}

at::Tensor gelu(const at::Tensor& x) {
  return GeluFunction::apply(x);
}

at::Tensor channel_linear(const at::Tensor& x, const torch::nn::LinearImpl& linear) {
  const int64_t b = x.size(0), c = x.size(1);
  const at::Tensor& w = linear.weight;   // (Co, C)
  const at::Tensor& bias = linear.bias;  // (Co)
  SCAFFOLD_CHECK(w.size(1) == c,
                 fmt::format("channel_linear: {} input channels for a ({}, {}) weight", c,
                             w.size(0), w.size(1)));
  std::vector<int64_t> shape = x.sizes().vec();
  shape[1] = w.size(0);
  // (Co, C) x (B, C, S) -> (B, Co, S): one product per example, the 1x1 convolution.
  at::Tensor y;
  if (x.device().is_cpu() && kernels::bf16_products_emulated()) {
    // Autocast's bf16 product without LibTorch's bf16 loops (docs/fno.md, "bf16 on a CPU without
    // bf16 products"): the operands rounded to bf16, multiplied in float32, the output rounded.
    const nn::AutocastGuard float32(nn::AutocastState::current().disabled());
    y = at::matmul(kernels::bf16_rounded(w), kernels::bf16_rounded(x.reshape({b, c, -1})))
            .to(at::kBFloat16);
  } else {
    y = at::matmul(w, x.reshape({b, c, -1}));
  }
  if (!bias.defined()) return y.view(shape);
  return (y + bias.view({-1, 1}).to(y.scalar_type())).view(shape);
}

at::Tensor grid_coordinates(const std::vector<int64_t>& local, int64_t first0, int64_t global_n0,
                            const at::TensorOptions& options) {
  const auto d = static_cast<int64_t>(local.size());
  std::vector<at::Tensor> axes;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t n = i == 0 ? global_n0 : local[static_cast<std::size_t>(i)];
    const int64_t start = i == 0 ? first0 : 0;
    // linspace(0, 1, n) restricted to this rank's points, computed in float64 then cast.
    const at::Tensor idx =
        at::arange(start, start + local[static_cast<std::size_t>(i)], at::kDouble);
    axes.push_back((n > 1 ? idx / static_cast<double>(n - 1) : idx).to(options));
  }
  std::vector<at::Tensor> mesh = at::meshgrid(axes, "ij");
  return at::stack(mesh, 0).unsqueeze(0);  // (1, d, *local)
}

FnoImpl::FnoImpl(FnoOptions options) : options_(std::move(options)) {
  const auto d = static_cast<int64_t>(options_.modes.size());
  SCAFFOLD_CHECK(d >= 1 && d <= 3, fmt::format("FNO: {} spatial dimensions (1 to 3 supported)", d));
  const int64_t lifted_in = options_.in_channels + (options_.grid_coordinates ? d : 0);
  const auto linear = [&](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(options_.bias));
  };
  SCAFFOLD_CHECK(options_.lifting_layers >= 1 && options_.projection_layers >= 2,
                 fmt::format("FNO: {} lifting and {} projection layers (expected >= 1 and >= 2)",
                             options_.lifting_layers, options_.projection_layers));
  const int64_t p = options_.projection_channels;
  // The lifting: lifting_layers - 1 hidden layers of P channels, then one to width. The last
  // layers keep the names "lift", "project" and "output" of the paper's model.
  lift_hidden_ = register_module("lift_hidden", torch::nn::ModuleList());
  for (int64_t l = 0; l + 1 < options_.lifting_layers; ++l)
    lift_hidden_->push_back(linear(l == 0 ? lifted_in : p, p));
  lift_ =
      register_module("lift", linear(options_.lifting_layers > 1 ? p : lifted_in, options_.width));
  spectral_ = register_module("spectral", torch::nn::ModuleList());
  pointwise_ = register_module("pointwise", torch::nn::ModuleList());
  for (int64_t l = 0; l < options_.layers; ++l) {
    SpectralConvOptions so;
    so.in_channels = options_.width;
    so.out_channels = options_.width;
    so.modes = options_.modes;
    so.real_mixing = options_.real_mode_mixing;
    so.transform = options_.spectral_transform;
    spectral_->push_back(SpectralConv(so));
    pointwise_->push_back(linear(options_.width, options_.width));
  }
  project_ = register_module("project", linear(options_.width, options_.projection_channels));
  project_hidden_ = register_module("project_hidden", torch::nn::ModuleList());
  for (int64_t l = 2; l < options_.projection_layers; ++l) project_hidden_->push_back(linear(p, p));
  output_ = register_module("output", linear(options_.projection_channels, options_.out_channels));
}

void FnoImpl::set_shard(std::shared_ptr<const FftShard> shard) {
  shard_ = shard;
  for (const auto& m : *spectral_) m->as<SpectralConvImpl>()->set_shard(shard);
}

at::Tensor FnoImpl::forward(const at::Tensor& x_in) {
  const auto d = static_cast<int64_t>(options_.modes.size());
  SCAFFOLD_CHECK(x_in.dim() == d + 2 && x_in.size(1) == options_.in_channels,
                 fmt::format("FNO: input {} for {} channels on a {}-d grid", c10::str(x_in.sizes()),
                             options_.in_channels, d));
  at::Tensor x = x_in;
  if (options_.grid_coordinates) {
    const std::vector<int64_t> local = x.sizes().slice(2).vec();
    const bool sharded = shard_ && shard_->parts() > 1;
    const at::Tensor coords = grid_coordinates(local, sharded ? shard_->local().start : 0,
                                               sharded ? shard_->extent : local[0], x.options());
    std::vector<int64_t> expand = coords.sizes().vec();
    expand[0] = x.size(0);
    x = at::cat({x, coords.expand(expand)}, 1);  // (B, C_in + d, *grid)
  }
  for (const auto& m : *lift_hidden_)
    x = fno::gelu(channel_linear(x, *m->as<torch::nn::LinearImpl>()));  // (B, P, *grid)
  x = channel_linear(x, *lift_);                                        // (B, width, *grid)
  for (int64_t l = 0; l < options_.layers; ++l) {
    const at::Tensor spectral =
        spectral_[static_cast<std::size_t>(l)]->as<SpectralConvImpl>()->forward(x);
    const auto& pointwise = *pointwise_[static_cast<std::size_t>(l)]->as<torch::nn::LinearImpl>();
    const bool gelu = l + 1 < options_.layers || options_.gelu_after_last_layer;
    if (pointwise_is_fused(options_, x.is_cpu(), nn::AutocastState::current().any_enabled()) &&
        x.scalar_type() == pointwise.weight.scalar_type() &&
        spectral.scalar_type() == x.scalar_type()) {
      x = fused_pointwise(x, pointwise, spectral, gelu);
      continue;
    }
    x = spectral + channel_linear(x, pointwise);
    if (gelu) x = fno::gelu(x);
  }
  // The projection's two maps in one pass over tiles of points (in the weights' precision).
  if (projection_is_fused(options_, x.is_cpu(), nn::AutocastState::current().any_enabled()) &&
      x.scalar_type() == project_->weight.scalar_type())
    return fused_projection(x, *project_, *output_);  // (B, C_out, *grid)
  x = fno::gelu(channel_linear(x, *project_));        // (B, projection_channels, *grid)
  for (const auto& m : *project_hidden_)
    x = fno::gelu(channel_linear(x, *m->as<torch::nn::LinearImpl>()));
  return channel_linear(x, *output_);  // (B, C_out, *grid)
}

int64_t model_bytes(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& p : module.parameters())
    n += p.numel() * static_cast<int64_t>(p.element_size());
  for (const at::Tensor& b : module.buffers())
    n += b.numel() * static_cast<int64_t>(b.element_size());
  return n;
}

}  // namespace scaffold::fno
