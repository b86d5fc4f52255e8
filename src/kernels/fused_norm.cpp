// The fused GroupNorm + ReLU of fused_norm.hpp. Every loop runs per (sample, channel) under
// at::parallel_for, so batch 1 with few groups still uses every thread; per-channel partial sums
// are combined into per-group ones afterwards (float64, serial, N*C values). Moments are two-pass
// within cache-sized blocks, merged across blocks with Chan's formula: as accurate as a two-pass
// over the whole group, at one pass over memory. The file is built with -ffp-contract=off so the
// backward's recomputed ReLU mask is bit-identical to the forward's.
#include "kernels/fused_norm.hpp"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"
#include "nn/autocast.hpp"

namespace scaffold::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kBlock = 2048;  // elements per two-pass block: 8 KiB of float32, re-read from L1
constexpr int kLanes = 16;        // independent float accumulators, so the compiler vectorises sums

#define SCAFFOLD_BLOCK_INLINE inline __attribute__((always_inline))

inline float load(const float* p) {
  return *p;
}
inline float load(const c10::BFloat16* p) {
  return static_cast<float>(*p);
}

// Mean and Σ (x - mean)² of one block, float accumulators (a block is short), float64 result.
template <typename T>
SCAFFOLD_BLOCK_INLINE void block_moments(const T* x, int64_t len, double& mean, double& m2) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += load(x + i + j);
  float sum = 0;
  for (float a : acc) sum += a;
  for (; i < len; ++i) sum += load(x + i);
  const float centre = sum / static_cast<float>(len);
  // Second pass about the float centre; the first-order term corrects its rounding.
  float d1[kLanes] = {}, d2[kLanes] = {};
  i = 0;
  for (; i + kLanes <= len; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float d = load(x + i + j) - centre;
      d1[j] += d;
      d2[j] += d * d;
    }
  }
  double s1 = 0, s2 = 0;
  for (int j = 0; j < kLanes; ++j) s1 += d1[j], s2 += d2[j];
  for (; i < len; ++i) {
    const double d = static_cast<double>(load(x + i) - centre);
    s1 += d;
    s2 += d * d;
  }
  const auto n = static_cast<double>(len);
  mean = centre + s1 / n;
  m2 = std::max(s2 - s1 * s1 / n, 0.0);
}

// Running (count, mean, M2) merged with Chan et al.'s pairwise formula.
struct Moments {
  double count = 0, mean = 0, m2 = 0;
  void merge(double n_b, double mean_b, double m2_b) {
    if (n_b == 0) return;
    const double n = count + n_b;
    const double delta = mean_b - mean;
    mean += delta * n_b / n;
    m2 += m2_b + delta * delta * count * n_b / n;
    count = n;
  }
};

// y = x * a + b per channel, from the group's float64 statistics; the forward and the backward's
// mask use this one computation, so both see the same floats.
struct Affine {
  float a, b;
};
inline Affine channel_affine(double mean, double rstd, float weight, float bias) {
  const double a = rstd * weight;
  return {static_cast<float>(a), static_cast<float>(bias - mean * a)};
}

// Shapes of one call: x viewed as (N, C, S), G groups of Cg = C / G channels.
struct Dims {
  int64_t n, c, g, cg, s;
  explicit Dims(const at::Tensor& x, int64_t groups)
      : n(x.size(0)),
        c(x.size(1)),
        g(groups),
        cg(x.size(1) / groups),
        s(x.numel() / std::max<int64_t>(1, n * c)) {}
};

// --- Per-channel loops: inlined into one clone per ISA (simd.hpp's: AVX-512, AVX with FMA,
// baseline) each, picked at load time, so a generic x86-64 build still runs wide vectors (the
// compiler vectorises the lanes).

template <typename T>
SCAFFOLD_SIMD_INLINE void moments_channel_impl(const T* xc, int64_t s, double& mean, double& m2) {
  Moments m;
  for (int64_t off = 0; off < s; off += kBlock) {
    const int64_t len = std::min(kBlock, s - off);
    double mb = 0, m2b = 0;
    block_moments(xc + off, len, mb, m2b);
    m.merge(static_cast<double>(len), mb, m2b);
  }
  mean = m.mean;
  m2 = m.m2;
}

template <typename T>
SCAFFOLD_SIMD_INLINE void output_channel_impl(const T* xc, int64_t s, Affine f, float* yc) {
  for (int64_t i = 0; i < s; ++i) {
    const float v = load(xc + i) * f.a + f.b;
    yc[i] = v <= 0.f ? 0.f : v;  // NaN passes, as relu's
  }
}

// Σ g and Σ g·(x − m) with g = dy where the forward's pre-ReLU value is > 0 and m the group's mean
// rounded to float: centred, so Σ g·x keeps its digits when |mean| >> std.
template <typename T>
SCAFFOLD_SIMD_INLINE void sums_channel_impl(const T* xc, const float* dyc, int64_t s, Affine f,
                                            float m, double& sum_g, double& sum_gxc) {
  double total_g = 0, total_gx = 0;
  for (int64_t off = 0; off < s; off += kBlock) {
    const int64_t len = std::min(kBlock, s - off);
    float ag[kLanes] = {}, agx[kLanes] = {};
    int64_t i = off;
    for (; i + kLanes <= off + len; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const float xv = load(xc + i + j), dyv = dyc[i + j];  // both loaded: a select, no branch
        const float g = xv * f.a + f.b <= 0.f ? 0.f : dyv;
        ag[j] += g;
        agx[j] += g * (xv - m);
      }
    }
    for (; i < off + len; ++i) {
      const float xv = load(xc + i), dyv = dyc[i];
      const float g = xv * f.a + f.b <= 0.f ? 0.f : dyv;
      ag[0] += g;
      agx[0] += g * (xv - m);
    }
    for (int j = 0; j < kLanes; ++j) total_g += ag[j], total_gx += agx[j];
  }
  sum_g = total_g;
  sum_gxc = total_gx;
}

// dx = k·g + p·x + q with k = rstd·w and the group's c2, c3 as p, q (see backward()).
template <typename T>
SCAFFOLD_SIMD_INLINE void input_channel_impl(const T* xc, const float* dyc, int64_t s, Affine f,
                                             float p, float q, T* dxc) {
  for (int64_t i = 0; i < s; ++i) {
    const float xv = load(xc + i), dyv = dyc[i];
    const float g = xv * f.a + f.b <= 0.f ? 0.f : dyv;
    dxc[i] = static_cast<T>(f.a * g + (p * xv + q));
  }
}

#define SCAFFOLD_CHANNEL_KERNELS(T)                                                             \
  SCAFFOLD_SIMD_CLONES void moments_channel(const T* xc, int64_t s, double& mean, double& m2) { \
    moments_channel_impl(xc, s, mean, m2);                                                      \
  }                                                                                             \
  SCAFFOLD_SIMD_CLONES void output_channel(const T* xc, int64_t s, Affine f, float* yc) {       \
    output_channel_impl(xc, s, f, yc);                                                          \
  }                                                                                             \
  SCAFFOLD_SIMD_CLONES void sums_channel(const T* xc, const float* dyc, int64_t s, Affine f,    \
                                         float m, double& sum_g, double& sum_gxc) {             \
    sums_channel_impl(xc, dyc, s, f, m, sum_g, sum_gxc);                                        \
  }                                                                                             \
  SCAFFOLD_SIMD_CLONES void input_channel(const T* xc, const float* dyc, int64_t s, Affine f,   \
                                          float p, float q, T* dxc) {                           \
    input_channel_impl(xc, dyc, s, f, p, q, dxc);                                               \
  }
SCAFFOLD_CHANNEL_KERNELS(float)
SCAFFOLD_CHANNEL_KERNELS(c10::BFloat16)
#undef SCAFFOLD_CHANNEL_KERNELS

// --- Whole-tensor passes, parallel over (sample, channel).

// Per (sample, channel) mean and M2 (N*C float64 each).
template <typename T>
void channel_moments(const T* x, const Dims& d, double* mean, double* m2) {
  kernels::parallel_for(0, d.n * d.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) moments_channel(x + nc * d.s, d.s, mean[nc], m2[nc]);
  });
}

template <typename T>
void forward_output(const T* x, const Dims& d, const double* mean, const double* rstd,
                    const float* weight, const float* bias, float* y) {
  kernels::parallel_for(0, d.n * d.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t ch = nc % d.c, ng = (nc / d.c) * d.g + ch / d.cg;
      const Affine f = channel_affine(mean[ng], rstd[ng], weight[ch], bias[ch]);
      output_channel(x + nc * d.s, d.s, f, y + nc * d.s);
    }
  });
}

// Per (sample, channel) Σ g and Σ g·(x − m) (sums_channel).
template <typename T>
void backward_sums(const T* x, const float* dy, const Dims& d, const double* mean,
                   const double* rstd, const float* weight, const float* bias, double* sum_g,
                   double* sum_gxc) {
  kernels::parallel_for(0, d.n * d.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t ch = nc % d.c, ng = (nc / d.c) * d.g + ch / d.cg;
      const Affine f = channel_affine(mean[ng], rstd[ng], weight[ch], bias[ch]);
      sums_channel(x + nc * d.s, dy + nc * d.s, d.s, f, static_cast<float>(mean[ng]), sum_g[nc],
                   sum_gxc[nc]);
    }
  });
}

template <typename T>
void backward_input(const T* x, const float* dy, const Dims& d, const double* mean,
                    const double* rstd, const double* c2, const double* c3, const float* weight,
                    const float* bias, T* dx) {
  kernels::parallel_for(0, d.n * d.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t ch = nc % d.c, ng = (nc / d.c) * d.g + ch / d.cg;
      const Affine f = channel_affine(mean[ng], rstd[ng], weight[ch], bias[ch]);
      input_channel(x + nc * d.s, dy + nc * d.s, d.s, f, static_cast<float>(c2[ng]),
                    static_cast<float>(c3[ng]), dx + nc * d.s);
    }
  });
}

template <typename Fn>
void dispatch(const at::Tensor& x, Fn&& fn) {
  if (x.scalar_type() == at::kBFloat16)
    fn(static_cast<const c10::BFloat16*>(x.data_ptr()), c10::BFloat16{});
  else
    fn(x.data_ptr<float>(), float{});
}

struct FusedNormCapsule : torch::CustomClassHolder {
  FusedNormCapsule(GroupNormReduction r, int64_t g, double e)
      : global(std::move(r)), groups(g), eps(e) {}
  GroupNormReduction global;  // empty: local statistics
  int64_t groups;
  double eps;
};

class GroupNormReluFunction : public torch::autograd::Function<GroupNormReluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<FusedNormCapsule> capsule,
                            const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    const Dims d(x, capsule->groups);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    // Per-channel moments, merged into per-group ones (N, G).
    at::Tensor ch_mean = at::empty({d.n, d.c}, f64), ch_m2 = at::empty({d.n, d.c}, f64);
    dispatch(x, [&](const auto* xp, auto) {
      channel_moments(xp, d, ch_mean.data_ptr<double>(), ch_m2.data_ptr<double>());
    });
    at::Tensor mean = at::empty({d.n, d.g}, f64), m2 = at::empty({d.n, d.g}, f64);
    {
      const double *cm = ch_mean.data_ptr<double>(), *cm2 = ch_m2.data_ptr<double>();
      double *gm = mean.data_ptr<double>(), *gm2 = m2.data_ptr<double>();
      for (int64_t ng = 0; ng < d.n * d.g; ++ng) {
        Moments m;
        for (int64_t k = 0; k < d.cg; ++k)
          m.merge(static_cast<double>(d.s), cm[ng * d.cg + k], cm2[ng * d.cg + k]);
        gm[ng] = m.mean;
        gm2[ng] = m.m2;
      }
    }
    const auto local_count = static_cast<double>(d.cg * d.s);
    at::Tensor rstd, count;
    if (capsule->global) {
      GroupStatistics stats = capsule->global.statistics(mean, m2, local_count, capsule->eps);
      mean = stats.mean.contiguous();
      rstd = stats.rstd.contiguous();
      count = stats.count.contiguous();
    } else {
      rstd = (m2 / local_count + capsule->eps).rsqrt();
      count = at::full_like(mean, local_count);
    }
    at::Tensor y = at::empty(x.sizes(), x.options().dtype(at::kFloat));
    dispatch(x, [&](const auto* xp, auto) {
      forward_output(xp, d, mean.data_ptr<double>(), rstd.data_ptr<double>(),
                     weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>());
    });
    ctx->save_for_backward({x, weight, bias, mean, rstd, count});
    ctx->saved_data["norm"] = at::IValue::make_capsule(std::move(capsule));
    return y;
  }

  // With g = dy·[pre-ReLU > 0], per (sample, group) db = Σ w·g, ds = Σ w·g·x (over the whole
  // sample: all-reduced in global mode), M the group's element count:
  //   dx = rstd·w·g + c2·x + c3,  c2 = rstd³ (mean·db − ds) / M,  c3 = −c2·mean − rstd·db / M
  //   dweight = Σ_n rstd Σ g·(x − mean),  dbias = Σ_n Σ g   (this shard's share)
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("norm").toCapsule();
    const auto& capsule = *static_cast<const FusedNormCapsule*>(holder.get());
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &bias = saved[2];
    const at::Tensor &mean = saved[3], &rstd = saved[4], &count = saved[5];  // (N, G) float64
    if (!grad_outputs.at(0).defined()) {
      // Every rank of the group must take part in the all-reduce, needed here or not.
      SCAFFOLD_CHECK(!capsule.global,
                     "fused GroupNorm + ReLU: global backward without an output gradient");
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const at::Tensor dy = grad_outputs[0].to(at::kFloat).contiguous();
    const Dims d(x, capsule.groups);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor sum_g = at::empty({d.n, d.c}, f64), sum_gxc = at::empty({d.n, d.c}, f64);
    const float *wp = weight.data_ptr<float>(), *bp = bias.data_ptr<float>();
    const double *mp = mean.data_ptr<double>(), *rp = rstd.data_ptr<double>();
    dispatch(x, [&](const auto* xp, auto) {
      backward_sums(xp, dy.data_ptr<float>(), d, mp, rp, wp, bp, sum_g.data_ptr<double>(),
                    sum_gxc.data_ptr<double>());
    });
    // Σ g·(x − mean) per (sample, channel), from the sums about the float-rounded mean.
    double *sg = sum_g.data_ptr<double>(), *sgx = sum_gxc.data_ptr<double>();
    for (int64_t nc = 0; nc < d.n * d.c; ++nc) {
      const int64_t ng = (nc / d.c) * d.g + (nc % d.c) / d.cg;
      sgx[nc] += (static_cast<double>(static_cast<float>(mp[ng])) - mp[ng]) * sg[nc];
    }
    // db = Σ w·g and the centred dsc = Σ w·g·(x − mean) = ds − mean·db, summed over the shards
    // (mean is the same on all of them), so c2 needs no difference of large terms.
    at::Tensor group_sums = at::zeros({2, d.n, d.g}, f64);  // db, dsc
    double* gs = group_sums.data_ptr<double>();
    for (int64_t nc = 0; nc < d.n * d.c; ++nc) {
      const int64_t ch = nc % d.c, ng = (nc / d.c) * d.g + ch / d.cg;
      gs[ng] += wp[ch] * sg[nc];
      gs[d.n * d.g + ng] += wp[ch] * sgx[nc];
    }
    if (capsule.global) capsule.global.sum(group_sums);
    std::vector<double> c2(static_cast<std::size_t>(d.n * d.g)), c3(c2.size());
    const double* cnt = count.data_ptr<double>();
    for (int64_t ng = 0; ng < d.n * d.g; ++ng) {
      const double db = gs[ng], dsc = gs[d.n * d.g + ng], r = rp[ng];
      c2[static_cast<std::size_t>(ng)] = -r * r * r * dsc / cnt[ng];
      c3[static_cast<std::size_t>(ng)] =
          -c2[static_cast<std::size_t>(ng)] * mp[ng] - r * db / cnt[ng];
    }
    at::Tensor dx = at::empty(x.sizes(), x.options());
    dispatch(x, [&](const auto* xp, auto zero) {
      using T = decltype(zero);
      backward_input(xp, dy.data_ptr<float>(), d, mp, rp, c2.data(), c3.data(), wp, bp,
                     static_cast<T*>(dx.data_ptr()));
    });
    at::Tensor d_weight = at::zeros({d.c}, f64), d_bias = at::zeros({d.c}, f64);
    double *dw = d_weight.data_ptr<double>(), *dbias = d_bias.data_ptr<double>();
    for (int64_t nc = 0; nc < d.n * d.c; ++nc) {
      const int64_t ch = nc % d.c, ng = (nc / d.c) * d.g + ch / d.cg;
      dw[ch] += rp[ng] * sgx[nc];
      dbias[ch] += sg[nc];
    }
    return {at::Tensor(), dx, d_weight.to(weight.scalar_type()), d_bias.to(bias.scalar_type())};
  }
};

}  // namespace

std::string group_norm_relu_unsupported(const at::Tensor& x, int64_t groups,
                                        const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !bias.defined())
    return "undefined input, weight or bias";
  if (!x.device().is_cpu()) return fmt::format("device {} (CPU only)", x.device().str());
  if (x.dim() < 3) return fmt::format("a {}-d input (needs N, C and spatial dimensions)", x.dim());
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16)
    return fmt::format("input dtype {} (float32 or bfloat16)", c10::toString(x.scalar_type()));
  if (!x.is_contiguous())
    return "a non-contiguous input (channels-last or strided; contiguous NCDHW only)";
  const int64_t c = x.size(1);
  if (groups < 1 || c % groups != 0)
    return fmt::format("{} groups do not divide {} channels", groups, c);
  for (const at::Tensor* p : {&weight, &bias}) {
    if (p->scalar_type() != at::kFloat || !p->device().is_cpu() || p->dim() != 1 ||
        p->size(0) != c || !p->is_contiguous())
      return fmt::format("weight and bias must be contiguous float32 CPU vectors of {} channels",
                         c);
  }
  return "";
}

at::Tensor group_norm_relu(const at::Tensor& x, int64_t groups, const at::Tensor& weight,
                           const at::Tensor& bias, double eps, const GroupNormReduction& global) {
  const std::string why = group_norm_relu_unsupported(x, groups, weight, bias);
  if (!why.empty()) throw core::Error("fused GroupNorm + ReLU does not run " + why);
  SCAFFOLD_CHECK(!global || global.sum,
                 "fused GroupNorm + ReLU: global statistics without their gradient sum");
  nn::AutocastGuard autocast_off(nn::AutocastState::current().disabled());
  return GroupNormReluFunction::apply(c10::make_intrusive<FusedNormCapsule>(global, groups, eps), x,
                                      weight, bias);
}

}  // namespace scaffold::kernels
