#include "kernels/conv_transpose.hpp"

#include <ATen/Dispatch.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "nn/memory_format.hpp"

namespace scaffold::kernels {
namespace {

// Sizes of one call: x (N, C, D, H, W), y (N, O, 2D, 2H, 2W); s = D H W voxels per sample.
struct Dims {
  int64_t n, c, o, d, h, w;
  int64_t s() const { return d * h * w; }
};

Dims dims_of(const at::Tensor& x, const at::Tensor& weight) {
  return {x.size(0), x.size(1), weight.size(1), x.size(2), x.size(3), x.size(4)};
}

// The weight (C, O, 2, 2, 2) as the matrix each layout multiplies by. NCDHW: (8 O, C), row
// (o, a, b, e) is output voxel (2z + a, 2y + b, 2x + e) of channel o. Channels-last: (C, 8 O),
// column (a, b, e, o), so each of a voxel's eight output positions is a run of O channels.
at::Tensor weight_matrix(const at::Tensor& weight, bool cl) {
  const int64_t c = weight.size(0), o = weight.size(1);
  return cl ? weight.permute({0, 2, 3, 4, 1}).reshape({c, 8 * o})
            : weight.reshape({c, 8 * o}).t().contiguous();
}

// The inverse of weight_matrix for its gradient.
at::Tensor weight_from_matrix(const at::Tensor& m, int64_t c, int64_t o, bool cl) {
  return cl ? m.view({c, 2, 2, 2, o}).permute({0, 4, 1, 2, 3}).contiguous()
            : m.t().contiguous().view({c, o, 2, 2, 2});
}

// NCDHW: r (8 O, s) of one sample -> y (O, 2D, 2H, 2W) (+ bias[o]), or back when `gather`
// (y read, r written, no bias). Rows (o, a, b, e = 0 and 1) interleave into one output row.
template <typename T>
void shuffle_ncdhw(T* r, T* y, const T* bias, const Dims& g, bool gather) {
  const int64_t rows = g.o * 4 * g.d * g.h;  // (o, a, b, z, y)
  const int64_t w = g.w, s = g.s();
  kernels::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t yy = i % g.h, z = (i / g.h) % g.d, ab = (i / (g.h * g.d)) % 4,
                    o = i / (g.h * g.d * 4);
      const int64_t a = ab / 2, b = ab % 2;
      T* r0 = r + (o * 8 + ab * 2) * s + (z * g.h + yy) * w;
      T* r1 = r0 + s;
      T* out = y + ((o * 2 * g.d + 2 * z + a) * 2 * g.h + 2 * yy + b) * 2 * w;
      if (gather) {
        for (int64_t x = 0; x < w; ++x) {
          r0[x] = out[2 * x];
          r1[x] = out[2 * x + 1];
        }
      } else {
        const T add = bias ? bias[o] : T(0);
        for (int64_t x = 0; x < w; ++x) {
          out[2 * x] = r0[x] + add;
          out[2 * x + 1] = r1[x] + add;
        }
      }
    }
  });
}

// Channels-last: r (s, 8 O) of one sample -> y (2D, 2H, 2W, O) (+ bias), or back when `gather`.
template <typename T>
void shuffle_cl(T* r, T* y, const T* bias, const Dims& g, bool gather) {
  const int64_t o = g.o;
  kernels::parallel_for(0, g.s(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const int64_t x = v % g.w, yy = (v / g.w) % g.h, z = v / (g.w * g.h);
      for (int q = 0; q < 8; ++q) {
        const int64_t a = q / 4, b = (q / 2) % 2, e = q % 2;
        T* src = r + (v * 8 + q) * o;
        T* out = y + (((2 * z + a) * 2 * g.h + 2 * yy + b) * 2 * g.w + 2 * x + e) * o;
        if (gather) {
          for (int64_t k = 0; k < o; ++k) src[k] = out[k];
        } else if (bias) {
          for (int64_t k = 0; k < o; ++k) out[k] = src[k] + bias[k];
        } else {
          for (int64_t k = 0; k < o; ++k) out[k] = src[k];
        }
      }
    }
  });
}

// Sample n's products r (NCDHW: (8 O, s); channels-last: (s, 8 O)) into y, or y into r.
void shuffle(const at::Tensor& r, const at::Tensor& y, const at::Tensor& bias, const Dims& g,
             int64_t n, bool cl, bool gather) {
  const int64_t y_sample = g.o * 8 * g.s();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, r.scalar_type(), "conv_transpose3d_k2s2", [&] {
    scalar_t* rp = r.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>() + n * y_sample;
    const scalar_t* bp = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
    if (cl)
      shuffle_cl<scalar_t>(rp, yp, bp, g, gather);
    else
      shuffle_ncdhw<scalar_t>(rp, yp, bp, g, gather);
  });
}

// Sample n of x (or dx) as a matrix: NCDHW (C, s), channels-last (s, C).
at::Tensor sample_matrix(const at::Tensor& x, int64_t n, const Dims& g, bool cl) {
  return cl ? x.select(0, n).permute({1, 2, 3, 0}).view({g.s(), g.c})
            : x.select(0, n).view({g.c, g.s()});
}

class ConvTransposeK2S2Function : public torch::autograd::Function<ConvTransposeK2S2Function> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& weight, const at::Tensor& bias) {
    const bool cl = nn::is_channels_last_3d(x_in);
    const at::Tensor x = x_in.contiguous(nn::volume_format(cl));
    const Dims g = dims_of(x, weight);
    const at::Tensor wm = weight_matrix(weight, cl);
    // No bias comes as an empty tensor (autograd inputs must be defined tensors).
    const at::Tensor b = bias.numel() > 0 ? bias.contiguous() : at::Tensor();
    at::Tensor y = at::empty({g.n, g.o, 2 * g.d, 2 * g.h, 2 * g.w},
                             x.options().memory_format(nn::volume_format(cl)));
    at::Tensor r = at::empty({cl ? g.s() : 8 * g.o, cl ? 8 * g.o : g.s()}, x.options());
    for (int64_t n = 0; n < g.n; ++n) {
      const at::Tensor xs = sample_matrix(x, n, g, cl);
      // A plain 2-D product per sample: LibTorch 1.13's batched matmul runs these shapes ~10x
      // slower than at::mm (bmm's own loop instead of one BLAS call).
      if (cl)
        at::mm_out(r, xs, wm);
      else
        at::mm_out(r, wm, xs);
      shuffle(r, y, b, g, n, cl, /*gather=*/false);
    }
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = b.defined();
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1];
    const bool cl = nn::is_channels_last_3d(x);
    const Dims g = dims_of(x, weight);
    const at::Tensor dy = grads.at(0).to(x.scalar_type()).contiguous(nn::volume_format(cl));
    const at::Tensor wm = weight_matrix(weight, cl);
    at::Tensor dx, dwm;
    if (ctx->needs_input_grad(0)) dx = at::empty_like(x, nn::volume_format(cl));
    const bool want_w = ctx->needs_input_grad(1);
    at::Tensor dr = at::empty({cl ? g.s() : 8 * g.o, cl ? 8 * g.o : g.s()}, x.options());
    for (int64_t n = 0; n < g.n; ++n) {
      shuffle(dr, dy, at::Tensor(), g, n, cl, /*gather=*/true);
      const at::Tensor xs = sample_matrix(x, n, g, cl);
      if (dx.defined()) {
        at::Tensor dxs = sample_matrix(dx, n, g, cl);
        if (cl)
          at::mm_out(dxs, dr, wm.t());
        else
          at::mm_out(dxs, wm.t(), dr);
      }
      if (want_w) {
        // NCDHW: d(8 O, C) = dr xs^T; channels-last: d(C, 8 O) = xs^T dr.
        const at::Tensor part = cl ? at::mm(xs.t(), dr) : at::mm(dr, xs.t());
        dwm = dwm.defined() ? dwm.add_(part) : part;
      }
    }
    const at::Tensor dw = want_w ? weight_from_matrix(dwm, g.c, g.o, cl) : at::Tensor();
    at::Tensor db;
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) db = dy.sum({0, 2, 3, 4});
    return {dx, dw, db};
  }
};

// A channels-last tensor as (N D H W, C): every voxel of the batch a row, a view.
at::Tensor voxel_rows(const at::Tensor& t) {
  return t.permute({0, 2, 3, 4, 1}).view({-1, t.size(1)});
}

// Sample n of an NCDHW tensor as (C, D H W), a view.
at::Tensor channel_rows(const at::Tensor& t, int64_t n) {
  return t.select(0, n).view({t.size(1), -1});
}

// The 1x1x1 convolution y = W x + b voxel by voxel. NCDHW: one product per sample, (O, C) x
// (C, s); channels-last: one for the whole batch, (N s, C) x (C, O). The backward writes each
// sample's input gradient in place: through autograd, per-sample products of selected slices
// would cost two zero-filled copies of the whole input gradient at batch 2 (select's backward).
class Conv1x1x1Function : public torch::autograd::Function<Conv1x1x1Function> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& weight, const at::Tensor& bias) {
    const bool cl = nn::is_channels_last_3d(x_in);
    const at::Tensor x = x_in.contiguous(nn::volume_format(cl));
    const int64_t o = weight.size(0);
    const at::Tensor wm = weight.reshape({o, x.size(1)});
    at::Tensor y = at::empty({x.size(0), o, x.size(2), x.size(3), x.size(4)},
                             x.options().memory_format(nn::volume_format(cl)));
    if (cl) {
      at::Tensor ym = voxel_rows(y);
      at::mm_out(ym, voxel_rows(x), wm.t());
    } else {
      for (int64_t n = 0; n < x.size(0); ++n) {
        at::Tensor ys = channel_rows(y, n);
        at::mm_out(ys, wm, channel_rows(x, n));
      }
    }
    if (bias.numel() > 0) y.add_(bias.view({1, o, 1, 1, 1}));
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.numel() > 0;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1];
    const bool cl = nn::is_channels_last_3d(x);
    const at::Tensor dy = grads.at(0).to(x.scalar_type()).contiguous(nn::volume_format(cl));
    const at::Tensor wm = weight.reshape({weight.size(0), x.size(1)});
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty_like(x, nn::volume_format(cl));
      if (cl) {
        at::Tensor dxm = voxel_rows(dx);
        at::mm_out(dxm, voxel_rows(dy), wm);
      } else {
        for (int64_t n = 0; n < x.size(0); ++n) {
          at::Tensor dxs = channel_rows(dx, n);
          at::mm_out(dxs, wm.t(), channel_rows(dy, n));
        }
      }
    }
    if (ctx->needs_input_grad(1)) {
      at::Tensor dwm;
      if (cl) {
        dwm = at::mm(voxel_rows(dy).t(), voxel_rows(x));
      } else {
        for (int64_t n = 0; n < x.size(0); ++n) {
          const at::Tensor dys = channel_rows(dy, n), xst = channel_rows(x, n).t();
          dwm = dwm.defined() ? dwm.addmm_(dys, xst) : at::mm(dys, xst);
        }
      }
      dw = dwm.view(weight.sizes());
    }
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) db = dy.sum({0, 2, 3, 4});
    return {dx, dw, db};
  }
};

// Both layers take CPU tensors of one dtype and a bias of c_out values or none.
void check_cpu_one_dtype(const char* name, const at::Tensor& x, const at::Tensor& weight,
                         const at::Tensor& bias, int64_t c_out) {
  if (!x.device().is_cpu() || weight.scalar_type() != x.scalar_type() ||
      (bias.defined() &&
       (bias.scalar_type() != x.scalar_type() || bias.dim() != 1 || bias.numel() != c_out)))
    throw core::Error(fmt::format(
        "{}: takes CPU tensors of one dtype and a bias of C_out = {} values; got input {} on {}, "
        "weight {}, bias {}",
        name, c_out, c10::toString(x.scalar_type()), x.device().str(),
        c10::toString(weight.scalar_type()),
        bias.defined()
            ? std::string(c10::toString(bias.scalar_type())) + " of " + std::to_string(bias.numel())
            : std::string("none")));
}

}  // namespace

at::Tensor conv_transpose3d_k2s2(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias) {
  if (x.dim() != 5 || weight.dim() != 5 || weight.size(0) != x.size(1) || weight.size(2) != 2 ||
      weight.size(3) != 2 || weight.size(4) != 2)
    throw core::Error(
        fmt::format("conv_transpose3d_k2s2: input {} and weight {} are not (N, C_in, D, H, W) and "
                    "(C_in, C_out, 2, 2, 2)",
                    fmt::join(x.sizes(), "x"), fmt::join(weight.sizes(), "x")));
  check_cpu_one_dtype("conv_transpose3d_k2s2", x, weight, bias, weight.size(1));
  return ConvTransposeK2S2Function::apply(x, weight,
                                          bias.defined() ? bias : at::empty({0}, x.options()));
}

at::Tensor conv3d_1x1x1(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() != 5 || weight.dim() != 5 || weight.size(1) != x.size(1) || weight.size(2) != 1 ||
      weight.size(3) != 1 || weight.size(4) != 1)
    throw core::Error(
        fmt::format("conv3d_1x1x1: input {} and weight {} are not (N, C_in, D, H, W) and (C_out, "
                    "C_in, 1, 1, 1)",
                    fmt::join(x.sizes(), "x"), fmt::join(weight.sizes(), "x")));
  check_cpu_one_dtype("conv3d_1x1x1", x, weight, bias, weight.size(0));
  return Conv1x1x1Function::apply(x, weight, bias.defined() ? bias : at::empty({0}, x.options()));
}

}  // namespace scaffold::kernels
