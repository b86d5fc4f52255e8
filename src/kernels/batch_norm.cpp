// The fused BatchNorm (+ add) + ReLU of batch_norm.hpp. A channels-last tensor is (M, C) rows of
// C contiguous channels, so every loop runs over a block of rows with the channels innermost (the
// compiler vectorises across channels); the rows split into one contiguous range of blocks per
// thread, each thread keeping its own per-channel float64 partials, summed in a fixed order after
// the parallel region (the result depends on the thread count, not on scheduling). The file is
// built with -ffp-contract=off so the backward's recomputed ReLU mask is bit-identical to the
// forward's.
#include "kernels/batch_norm.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"
#include "nn/autocast.hpp"

namespace scaffold::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per block: ~32 KiB of float32 (L1-resident for the moments' second pass), >= 16 rows so
// the per-block float64 merge stays small against the block's work at 2048 channels.
int64_t block_rows(int64_t c) {
  return std::max<int64_t>(16, 8192 / std::max<int64_t>(1, c));
}

// --- Row-block loops, channels innermost; one clone per ISA (simd.hpp's SCAFFOLD_SIMD_CLONES:
// AVX-512, AVX with FMA, baseline), picked at load time.

// Per channel over `rows` rows: the block's float mean `centre`, then Σ d and Σ d² of
// d = x − centre (the first-order term corrects the centre's rounding).
SCAFFOLD_SIMD_CLONES void block_moments(const float* __restrict x, int64_t rows, int64_t c,
                                        float* __restrict centre, float* __restrict s1,
                                        float* __restrict s2) {
  for (int64_t j = 0; j < c; ++j) centre[j] = 0.f, s1[j] = 0.f, s2[j] = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    for (int64_t j = 0; j < c; ++j) centre[j] += xr[j];
  }
  const float inv = 1.f / static_cast<float>(rows);
  for (int64_t j = 0; j < c; ++j) centre[j] *= inv;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    for (int64_t j = 0; j < c; ++j) {
      const float d = xr[j] - centre[j];
      s1[j] += d;
      s2[j] += d * d;
    }
  }
}

// y = relu(x·a + b [+ residual]) per channel. NaN passes, as relu's.
SCAFFOLD_SIMD_CLONES void output_rows(const float* __restrict x, const float* __restrict res,
                                      int64_t rows, int64_t c, const float* __restrict a,
                                      const float* __restrict b, float* __restrict y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    if (res != nullptr) {
      const float* rr = res + r * c;
      for (int64_t j = 0; j < c; ++j) {
        const float v = xr[j] * a[j] + b[j] + rr[j];
        yr[j] = v <= 0.f ? 0.f : v;
      }
    } else {
      for (int64_t j = 0; j < c; ++j) {
        const float v = xr[j] * a[j] + b[j];
        yr[j] = v <= 0.f ? 0.f : v;
      }
    }
  }
}

// Per channel Σ g and Σ g·(x − m) over a block, m the channel's mean rounded to float; g = dy
// where the forward's pre-ReLU value was > 0: recomputed exactly as output_rows computed it,
// or, with a residual, read from the output y (ReLU's own backward test, as LibTorch's
// threshold_backward) and written to `g_out` (the residual's gradient).
SCAFFOLD_SIMD_CLONES void sums_rows(const float* __restrict x, const float* __restrict y,
                                    const float* __restrict dy, int64_t rows, int64_t c,
                                    const float* __restrict a, const float* __restrict b,
                                    const float* __restrict m, float* __restrict sg,
                                    float* __restrict sgx, float* __restrict g_out) {
  for (int64_t j = 0; j < c; ++j) sg[j] = 0.f, sgx[j] = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * c, *dyr = dy + r * c;
    if (y != nullptr) {
      const float* yr = y + r * c;
      float* gr = g_out + r * c;
      for (int64_t j = 0; j < c; ++j) {
        const float g = yr[j] <= 0.f ? 0.f : dyr[j];
        gr[j] = g;
        sg[j] += g;
        sgx[j] += g * (xr[j] - m[j]);
      }
    } else {
      for (int64_t j = 0; j < c; ++j) {
        const float g = xr[j] * a[j] + b[j] <= 0.f ? 0.f : dyr[j];
        sg[j] += g;
        sgx[j] += g * (xr[j] - m[j]);
      }
    }
  }
}

// dx = k·g + p·x + q per channel. `g` is the masked gradient itself when `masked`, else dy
// (masked here as in sums_rows).
SCAFFOLD_SIMD_CLONES void input_rows(const float* __restrict x, const float* __restrict g_or_dy,
                                     bool masked, int64_t rows, int64_t c,
                                     const float* __restrict a, const float* __restrict b,
                                     const float* __restrict k, const float* __restrict p,
                                     const float* __restrict q, float* __restrict dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * c, *gr = g_or_dy + r * c;
    float* dxr = dx + r * c;
    if (masked) {
      for (int64_t j = 0; j < c; ++j) dxr[j] = k[j] * gr[j] + (p[j] * xr[j] + q[j]);
    } else {
      for (int64_t j = 0; j < c; ++j) {
        const float g = xr[j] * a[j] + b[j] <= 0.f ? 0.f : gr[j];
        dxr[j] = k[j] * g + (p[j] * xr[j] + q[j]);
      }
    }
  }
}

// --- Whole-tensor passes.

// The rows [0, m) as `parts` contiguous ranges of whole blocks; f(part, row_begin, row_end) runs
// each part on one thread of LibTorch's pool.
template <typename F>
void for_each_part(int64_t m, int64_t rows_per_block, int64_t parts, const F& f) {
  const int64_t blocks = (m + rows_per_block - 1) / rows_per_block;
  const int64_t per_part = (blocks + parts - 1) / parts;
  kernels::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = std::min(m, t * per_part * rows_per_block);
      const int64_t r1 = std::min(m, (t + 1) * per_part * rows_per_block);
      if (r0 < r1) f(t, r0, r1);
    }
  });
}

// Shapes of one call and how its rows split.
struct Rows {
  int64_t m, c, block, parts;
  explicit Rows(const at::Tensor& x)
      : m(x.numel() / x.size(1)),
        c(x.size(1)),
        block(block_rows(x.size(1))),
        parts(std::max<int64_t>(
            1, std::min<int64_t>(at::get_num_threads(), (m + block - 1) / block))) {}
};

// Per-channel mean and M2 = Σ (x − mean)² over all rows, float64.
void channel_moments(const float* x, const Rows& d, std::vector<double>& mean,
                     std::vector<double>& m2) {
  const auto c = static_cast<std::size_t>(d.c);
  std::vector<double> part_mean(c * d.parts, 0.0), part_m2(c * d.parts, 0.0);
  std::vector<double> part_count(static_cast<std::size_t>(d.parts), 0.0);
  for_each_part(d.m, d.block, d.parts, [&](int64_t t, int64_t r0, int64_t r1) {
    std::vector<float> centre(c), s1(c), s2(c);
    double* pm = part_mean.data() + t * d.c;
    double* pm2 = part_m2.data() + t * d.c;
    double count = 0;
    for (int64_t r = r0; r < r1; r += d.block) {
      const int64_t rows = std::min(d.block, r1 - r);
      block_moments(x + r * d.c, rows, d.c, centre.data(), s1.data(), s2.data());
      const auto nb = static_cast<double>(rows);
      const double n = count + nb;
      for (std::size_t j = 0; j < c; ++j) {  // Chan et al.'s merge of (count, mean, M2)
        const double s1j = s1[j];
        const double mb = centre[j] + s1j / nb;
        const double m2b = std::max(static_cast<double>(s2[j]) - s1j * s1j / nb, 0.0);
        const double delta = mb - pm[j];
        pm[j] += delta * nb / n;
        pm2[j] += m2b + delta * delta * count * nb / n;
      }
      count = n;
    }
    part_count[static_cast<std::size_t>(t)] = count;
  });
  mean.assign(c, 0.0);
  m2.assign(c, 0.0);
  double count = 0;
  for (int64_t t = 0; t < d.parts; ++t) {
    const double nb = part_count[static_cast<std::size_t>(t)];
    if (nb == 0) continue;
    const double n = count + nb;
    for (std::size_t j = 0; j < c; ++j) {
      const double delta = part_mean[t * c + j] - mean[j];
      mean[j] += delta * nb / n;
      m2[j] += part_m2[t * c + j] + delta * delta * count * nb / n;
    }
    count = n;
  }
}

// y = x·a + b from float64 statistics, rounded once to float: the forward's output and the
// backward's mask use these same floats.
struct ChannelAffine {
  std::vector<float> a, b;
};
ChannelAffine channel_affine(const double* mean, const double* rstd, const float* weight,
                             const float* bias, int64_t c) {
  ChannelAffine f{std::vector<float>(static_cast<std::size_t>(c)),
                  std::vector<float>(static_cast<std::size_t>(c))};
  for (int64_t j = 0; j < c; ++j) {
    const double a = rstd[j] * weight[j];
    f.a[static_cast<std::size_t>(j)] = static_cast<float>(a);
    f.b[static_cast<std::size_t>(j)] = static_cast<float>(bias[j] - mean[j] * a);
  }
  return f;
}

const float* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

// The running statistics ride along undifferentiated (updated in place, as at::batch_norm), in a
// struct: LibTorch 1.13's custom functions cannot take an undefined tensor as an input.
struct RunningStatistics {
  at::Tensor mean, var;  // (C) float32, or both undefined
};

class BatchNormReluFunction : public torch::autograd::Function<BatchNormReluFunction> {
 public:
  // `residual` is x itself when has_residual is false (for the same reason), and then unused.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& residual_or_x,
                            const RunningStatistics& running, double momentum, double eps,
                            bool has_residual) {
    const at::Tensor residual = has_residual ? residual_or_x : at::Tensor();
    const at::Tensor &running_mean = running.mean, &running_var = running.var;
    const Rows d(x);
    std::vector<double> mean, m2;
    channel_moments(x.data_ptr<float>(), d, mean, m2);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor mean_t = at::empty({d.c}, f64), rstd_t = at::empty({d.c}, f64);
    double *mp = mean_t.data_ptr<double>(), *rp = rstd_t.data_ptr<double>();
    const auto count = static_cast<double>(d.m);
    for (int64_t j = 0; j < d.c; ++j) {
      mp[j] = mean[static_cast<std::size_t>(j)];
      rp[j] = 1.0 / std::sqrt(m2[static_cast<std::size_t>(j)] / count + eps);
    }
    if (running_mean.defined()) {  // as at::batch_norm: unbiased variance into the running one
      float *rm = running_mean.data_ptr<float>(), *rv = running_var.data_ptr<float>();
      for (int64_t j = 0; j < d.c; ++j) {
        const double unbiased = m2[static_cast<std::size_t>(j)] / (count - 1.0);
        rm[j] = static_cast<float>((1.0 - momentum) * rm[j] + momentum * mp[j]);
        rv[j] = static_cast<float>((1.0 - momentum) * rv[j] + momentum * unbiased);
      }
    }
    const ChannelAffine f =
        channel_affine(mp, rp, weight.data_ptr<float>(), bias.data_ptr<float>(), d.c);
    at::Tensor y = at::empty_like(x, at::MemoryFormat::ChannelsLast);
    const float *xp = x.data_ptr<float>(), *res = data_or_null(residual);
    float* yp = y.data_ptr<float>();
    for_each_part(d.m, d.block, d.parts, [&](int64_t, int64_t r0, int64_t r1) {
      output_rows(xp + r0 * d.c, res != nullptr ? res + r0 * d.c : nullptr, r1 - r0, d.c,
                  f.a.data(), f.b.data(), yp + r0 * d.c);
    });
    // With a residual, ReLU's mask comes from the output y (which the next layer keeps anyway)
    // rather than from the residual, which may be a tensor nothing else keeps (the downsample
    // branch's BatchNorm output).
    // (x in y's slot without one: an undefined tensor cannot be saved in LibTorch 1.13.)
    ctx->save_for_backward({x, weight, bias, mean_t, rstd_t, has_residual ? y : x});
    ctx->saved_data["has_residual"] = has_residual;
    return y;
  }

  // With g = dy·[pre-ReLU > 0] and, per channel, sg = Σ g, sgx = Σ g·(x − mean) over the M rows:
  //   dx = k·g + p·x + q,  k = rstd·w,  p = −rstd³·w·sgx / M,  q = −p·mean − rstd·w·sg / M
  //   dweight = rstd·sgx,  dbias = sg,  dresidual = g
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &bias = saved[2];
    const at::Tensor &mean_t = saved[3], &rstd_t = saved[4];
    const bool with_residual = ctx->saved_data.at("has_residual").toBool();
    const at::Tensor y = with_residual ? saved[5] : at::Tensor();
    variable_list grads(8);  // one per forward argument; undefined: no gradient
    if (!grad_outputs.at(0).defined()) return grads;
    const at::Tensor dy = grad_outputs[0].to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
    const Rows d(x);
    const auto c = static_cast<std::size_t>(d.c);
    const double *mp = mean_t.data_ptr<double>(), *rp = rstd_t.data_ptr<double>();
    const float* wp = weight.data_ptr<float>();
    const ChannelAffine f = channel_affine(mp, rp, wp, bias.data_ptr<float>(), d.c);
    std::vector<float> mean_f(c);
    for (std::size_t j = 0; j < c; ++j) mean_f[j] = static_cast<float>(mp[j]);

    at::Tensor d_residual;
    if (with_residual) d_residual = at::empty_like(x, at::MemoryFormat::ChannelsLast);
    const float *xp = x.data_ptr<float>(), *yp = data_or_null(y);
    const float* dyp = dy.data_ptr<float>();
    float* gp = with_residual ? d_residual.data_ptr<float>() : nullptr;
    std::vector<double> part_sg(c * d.parts, 0.0), part_sgx(c * d.parts, 0.0);
    for_each_part(d.m, d.block, d.parts, [&](int64_t t, int64_t r0, int64_t r1) {
      std::vector<float> sg(c), sgx(c);
      double *psg = part_sg.data() + t * d.c, *psgx = part_sgx.data() + t * d.c;
      for (int64_t r = r0; r < r1; r += d.block) {
        const int64_t rows = std::min(d.block, r1 - r);
        sums_rows(xp + r * d.c, yp != nullptr ? yp + r * d.c : nullptr, dyp + r * d.c, rows, d.c,
                  f.a.data(), f.b.data(), mean_f.data(), sg.data(), sgx.data(),
                  gp != nullptr ? gp + r * d.c : nullptr);
        for (std::size_t j = 0; j < c; ++j) psg[j] += sg[j], psgx[j] += sgx[j];
      }
    });
    std::vector<float> k(c), p(c), q(c);
    at::Tensor d_weight = at::empty({d.c}, weight.options());
    at::Tensor d_bias = at::empty({d.c}, weight.options());
    float *dwp = d_weight.data_ptr<float>(), *dbp = d_bias.data_ptr<float>();
    const auto count = static_cast<double>(d.m);
    for (std::size_t j = 0; j < c; ++j) {
      double sg = 0, sgx = 0;
      for (int64_t t = 0; t < d.parts; ++t) sg += part_sg[t * c + j], sgx += part_sgx[t * c + j];
      sgx += (static_cast<double>(mean_f[j]) - mp[j]) * sg;  // about the exact mean
      const double r = rp[j], w = wp[j];
      const double pj = -r * r * r * w * sgx / count;
      k[j] = static_cast<float>(r * w);
      p[j] = static_cast<float>(pj);
      q[j] = static_cast<float>(-pj * mp[j] - r * w * sg / count);
      dwp[j] = static_cast<float>(r * sgx);
      dbp[j] = static_cast<float>(sg);
    }
    at::Tensor dx = at::empty_like(x, at::MemoryFormat::ChannelsLast);
    float* dxp = dx.data_ptr<float>();
    const float* g_or_dy = with_residual ? gp : dyp;
    for_each_part(d.m, d.block, d.parts, [&](int64_t, int64_t r0, int64_t r1) {
      input_rows(xp + r0 * d.c, g_or_dy + r0 * d.c, with_residual, r1 - r0, d.c, f.a.data(),
                 f.b.data(), k.data(), p.data(), q.data(), dxp + r0 * d.c);
    });
    grads[0] = dx;
    grads[1] = d_weight;
    grads[2] = d_bias;
    grads[3] = d_residual;
    return grads;
  }
};

bool is_vector_of(const at::Tensor& t, int64_t c) {
  return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.dim() == 1 && t.size(0) == c &&
         t.is_contiguous();
}

}  // namespace

std::string batch_norm_relu_unsupported(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias, const at::Tensor& running_mean,
                                        const at::Tensor& running_var, const at::Tensor& residual) {
  if (!x.defined() || !weight.defined() || !bias.defined())
    return "undefined input, weight or bias";
  if (!x.device().is_cpu()) return fmt::format("device {} (CPU only)", x.device().str());
  if (x.scalar_type() != at::kFloat)
    return fmt::format("input dtype {} (float32 only)", c10::toString(x.scalar_type()));
  if (x.dim() != 4) return fmt::format("a {}-d input (needs N, C, H, W)", x.dim());
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast))
    return "an input that is not channels-last (NCHW or strided; channels-last only)";
  const int64_t c = x.size(1);
  if (x.numel() / std::max<int64_t>(1, c) < 2)
    return "one value per channel (training-mode statistics need more than one)";
  if (!is_vector_of(weight, c) || !is_vector_of(bias, c))
    return fmt::format("weight and bias must be contiguous float32 CPU vectors of {} channels", c);
  if (running_mean.defined() != running_var.defined())
    return "running_mean and running_var must both be given or both be undefined";
  if (running_mean.defined() && (!is_vector_of(running_mean, c) || !is_vector_of(running_var, c)))
    return fmt::format(
        "running_mean and running_var must be contiguous float32 CPU vectors of {} channels", c);
  if (residual.defined() &&
      (residual.sizes() != x.sizes() || residual.scalar_type() != at::kFloat ||
       !residual.device().is_cpu() || !residual.is_contiguous(at::MemoryFormat::ChannelsLast)))
    return "a residual of another shape, dtype, device or layout than the input";
  return "";
}

at::Tensor batch_norm_relu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var,
                           double momentum, double eps, const at::Tensor& residual) {
  const std::string why =
      batch_norm_relu_unsupported(x, weight, bias, running_mean, running_var, residual);
  if (!why.empty()) throw core::Error("fused BatchNorm + ReLU does not run " + why);
  RECORD_FUNCTION("scaffold::batch_norm_relu", std::vector<c10::IValue>{});
  nn::AutocastGuard autocast_off(nn::AutocastState::current().disabled());
  const bool has_residual = residual.defined();
  return BatchNormReluFunction::apply(x, weight, bias, has_residual ? residual : x,
                                      RunningStatistics{running_mean, running_var}, momentum, eps,
                                      has_residual);
}

}  // namespace scaffold::kernels
