#include "workloads/scaffold/fused_loss.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::train {
namespace {

using kernels::simd::i16;
using kernels::simd::kVec;
using kernels::simd::loadv;
using kernels::simd::storev;
using kernels::simd::v16;

constexpr int64_t kChunk = 1024;  // voxels of one sample per work item, a multiple of kVec

// e^x for x <= 0 (a logit minus its voxel's maximum): x = n ln2 + r, |r| <= ln2 / 2, e^r by its
// degree-7 minimax polynomial (Cephes' coefficients), 2^n from the exponent bits. Below -87
// (where e^x leaves float32's normal range) it returns e^-87, 1.6e-38: a probability no sum can
// tell from 0. (Vectors by reference, never by value: kernels/simd.hpp says why.)
SCAFFOLD_SIMD_INLINE void exp_nonpositive(const v16& x_in, v16& out) {
  const v16 x = x_in < -87.f ? (v16{} - 87.f) : x_in;
  const v16 t = x * 1.44269504088896341f + 0.5f;
  i16 n = __builtin_convertvector(t, i16);            // toward zero
  n += t < __builtin_convertvector(n, v16) ? -1 : 0;  // floor: t may be negative
  const v16 fn = __builtin_convertvector(n, v16);
  const v16 r = (x - fn * 0.693359375f) + fn * 2.12194440e-4f;
  v16 p = v16{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  out = p * reinterpret_cast<v16>((n + 127) << 23);
}

// ln s for s >= 1 (the softmax denominator, at most K): s = m 2^e with m in [sqrt 1/2, sqrt 2),
// ln m = f - f^2/2 + f^3 P(f) with f = m - 1 (Cephes' coefficients).
SCAFFOLD_SIMD_INLINE void log_from_one(const v16& s, v16& out) {
  const i16 bits = reinterpret_cast<i16>(s);
  i16 e = ((bits >> 23) & 0xff) - 127;
  v16 m = reinterpret_cast<v16>((bits & 0x7fffff) | 0x3f800000);  // [1, 2)
  const i16 high = m > 1.41421356237f;                            // -1 where true
  m = high ? m * 0.5f : m;
  e -= high;
  const v16 f = m - 1.f, z = f * f, fe = __builtin_convertvector(e, v16);
  v16 y = v16{} + 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z - 2.12194440e-4f * fe - 0.5f * z;
  out = f + y + 0.693359375f * fe;
}

SCAFFOLD_SIMD_INLINE float lane_sum(const v16& v) {
  float s = 0.f;
  for (int i = 0; i < kVec; ++i) s += v[i];
  return s;
}

// One work item: voxels v0 .. v0 + n of one sample. x points at the sample (K rows of s voxels),
// y at its labels.
struct Chunk {
  const float* x;
  const int64_t* y;
  int64_t s, v0, n;
  int k;
};

// Work space of one chunk, padded to whole vectors: the logits (K rows), e = exp(x - m) (K rows),
// and per voxel the maximum m, 1 / Σe (0 on padding) and the label as a float (-1 on padding).
struct Scratch {
  std::vector<float> x, e;
  float m[kChunk], inv[kChunk], label[kChunk];
  explicit Scratch(int64_t k)
      : x(static_cast<std::size_t>(k * kChunk)), e(static_cast<std::size_t>(k * kChunk)) {}
};

// Fills the scratch for chunk c; returns the number of labels outside [0, K) (read as class 0),
// and in `finite` whether every logit is finite. Also m := m + ln Σe when `with_log`.
SCAFFOLD_SIMD_INLINE int64_t softmax_chunk(const Chunk& c, Scratch& w, bool with_log,
                                           bool& finite) {
  const int64_t padded = (c.n + kVec - 1) / kVec * kVec;
  for (int j = 0; j < c.k; ++j) {
    float* xj = w.x.data() + j * kChunk;
    std::memcpy(xj, c.x + j * c.s + c.v0, static_cast<std::size_t>(c.n) * sizeof(float));
    std::fill(xj + c.n, xj + padded, 0.f);
  }
  int64_t bad = 0;
  for (int64_t v = 0; v < padded; ++v) {
    const int64_t label = v < c.n ? c.y[c.v0 + v] : -1;
    const bool ok = label >= 0 && label < c.k;
    bad += v < c.n && !ok ? 1 : 0;
    w.label[v] = ok ? static_cast<float>(label) : (v < c.n ? 0.f : -1.f);
  }
  v16 check{};
  for (int64_t v = 0; v < padded; v += kVec) {
    v16 m = loadv(w.x.data() + v).v;
    for (int j = 1; j < c.k; ++j) {
      const v16 xj = loadv(w.x.data() + j * kChunk + v).v;
      m = xj > m ? xj : m;
    }
    v16 sum{};
    for (int j = 0; j < c.k; ++j) {
      const v16 xj = loadv(w.x.data() + j * kChunk + v).v;
      check += xj * 0.f;  // NaN when xj is NaN or infinite
      v16 ej;
      exp_nonpositive(xj - m, ej);
      storev(w.e.data() + j * kChunk + v, ej);
      sum += ej;
    }
    const v16 valid = loadv(w.label + v).v >= 0.f ? (v16{} + 1.f) : v16{};
    storev(w.inv + v, valid / sum);
    if (with_log) {
      v16 log_sum;
      log_from_one(sum, log_sum);
      m += log_sum;
    }
    storev(w.m + v, m);
  }
  finite = std::isfinite(lane_sum(check));
  return bad;
}

// Forward of one chunk into out[2 + 3 (K-1)], one sample's share of the result:
// [Σ w_y (-log p_y), Σ w_y, I (K-1), P (K-1), G (K-1)]. Returns the bad labels.
SCAFFOLD_SIMD_CLONES int64_t forward_chunk(const Chunk& c, const float* weights, Scratch& w,
                                           float* out, bool& finite) {
  const int64_t bad = softmax_chunk(c, w, /*with_log=*/true, finite);
  // -log p_y = (m + ln Σe) - x_y
  double ce = 0.0, wsum = 0.0;  // a scalar loop: double costs nothing here
  for (int64_t v = 0; v < c.n; ++v) {
    const auto label = static_cast<int64_t>(w.label[v]);
    const float wy = weights[label];
    ce += wy * (w.m[v] - w.x[label * kChunk + v]);
    wsum += wy;
  }
  const int fg = c.k - 1;
  for (int j = 1; j < c.k; ++j) {
    v16 p_sum{}, hit_sum{}, count{};
    for (int64_t v = 0; v < c.n; v += kVec) {
      const v16 p = loadv(w.e.data() + j * kChunk + v).v * loadv(w.inv + v).v;
      const i16 hit = loadv(w.label + v).v == static_cast<float>(j);
      p_sum += p;
      hit_sum += hit ? p : v16{};
      count += hit ? (v16{} + 1.f) : v16{};
    }
    out[2 + (j - 1)] = lane_sum(hit_sum);
    out[2 + fg + (j - 1)] = lane_sum(p_sum);
    out[2 + 2 * fg + (j - 1)] = lane_sum(count);
  }
  out[0] = static_cast<float>(ce);
  out[1] = static_cast<float>(wsum);
  return bad;
}

// Backward of one chunk: d logits from d ce (g_ce), d I (gi[K-1]) and d P (gp[K-1]) of its
// sample. With a_k = gp[k] + [y = k] gi[k] (a_0 = 0) and A = Σ_k a_k p_k:
// dx_j = g_ce w_y (p_j - [y = j]) + p_j (a_j - A). Written to dx (the sample's K rows of s).
SCAFFOLD_SIMD_CLONES void backward_chunk(const Chunk& c, const float* weights, float g_ce,
                                         const float* gi, const float* gp, Scratch& w, float* dx) {
  bool finite = true;
  softmax_chunk(c, w, /*with_log=*/false, finite);
  const int64_t padded = (c.n + kVec - 1) / kVec * kVec;
  float wy[kChunk];
  for (int64_t v = 0; v < padded; ++v)
    wy[v] = g_ce * weights[w.label[v] >= 0.f ? static_cast<int64_t>(w.label[v]) : 0];
  for (int64_t v = 0; v < padded; v += kVec) {
    const v16 inv = loadv(w.inv + v).v, label = loadv(w.label + v).v;
    v16 big_a{};
    for (int j = 1; j < c.k; ++j) {
      const v16 a = gp[j - 1] + (label == static_cast<float>(j) ? (v16{} + gi[j - 1]) : v16{});
      big_a += a * loadv(w.e.data() + j * kChunk + v).v * inv;
    }
    const v16 g = loadv(wy + v).v;
    for (int j = 0; j < c.k; ++j) {
      const i16 hit = label == static_cast<float>(j);
      const v16 p = loadv(w.e.data() + j * kChunk + v).v * inv;
      const v16 a = j > 0 ? gp[j - 1] + (hit ? (v16{} + gi[j - 1]) : v16{}) : v16{};
      storev(w.e.data() + j * kChunk + v,
             g * (p - (hit ? (v16{} + 1.f) : v16{})) + p * (a - big_a));
    }
  }
  for (int j = 0; j < c.k; ++j)
    std::memcpy(dx + j * c.s + c.v0, w.e.data() + j * kChunk,
                static_cast<std::size_t>(c.n) * sizeof(float));
}

struct Layout {
  int64_t b, k, s, chunks_per_sample;
  int64_t chunks() const { return b * chunks_per_sample; }
  Chunk chunk(const float* x, const int64_t* y, int64_t i) const {
    const int64_t sample = i / chunks_per_sample, v0 = (i % chunks_per_sample) * kChunk;
    return Chunk{x + sample * k * s,       y + sample * s,     s, v0,
                 std::min(kChunk, s - v0), static_cast<int>(k)};
  }
};

Layout layout_of(const at::Tensor& x) {
  const int64_t s = x.size(2) * x.size(3) * x.size(4);
  return Layout{x.size(0), x.size(1), s, (s + kChunk - 1) / kChunk};
}

class SoftmaxLossSums : public torch::autograd::Function<SoftmaxLossSums> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& target, const at::Tensor& class_weights) {
    const at::Tensor x = logits.contiguous(), y = target.contiguous(),
                     w = class_weights.contiguous();
    const Layout l = layout_of(x);
    const int64_t fg = l.k - 1, per_chunk = 2 + 3 * fg;
    std::vector<float> partial(static_cast<std::size_t>(l.chunks() * per_chunk));
    std::vector<char> finite(static_cast<std::size_t>(l.chunks()), 1);
    std::vector<int64_t> bad(static_cast<std::size_t>(l.chunks()));
    const float* xp = x.data_ptr<float>();
    const int64_t* yp = y.data_ptr<int64_t>();
    const float* wp = w.data_ptr<float>();
    kernels::parallel_for(0, l.chunks(), 1, [&](int64_t begin, int64_t end) {
      auto scratch = std::make_unique<Scratch>(l.k);
      for (int64_t i = begin; i < end; ++i) {
        bool ok = true;
        bad[i] = forward_chunk(l.chunk(xp, yp, i), wp, *scratch, &partial[i * per_chunk], ok);
        finite[i] = ok ? 1 : 0;
      }
    });
    int64_t bad_labels = 0;
    for (const int64_t b : bad) bad_labels += b;
    if (bad_labels > 0)
      throw core::Error(fmt::format(
          "segmentation_loss: {} target labels are outside [0, {}) (the logits' classes)",
          bad_labels, l.k));
    // Chunks added in order, in double: the same sums on any number of threads.
    std::vector<double> total(static_cast<std::size_t>(2 + 3 * l.b * fg), 0.0);
    bool all_finite = true;
    for (int64_t i = 0; i < l.chunks(); ++i) {
      all_finite = all_finite && finite[i] != 0;
      const float* p = &partial[i * per_chunk];
      const int64_t sample = i / l.chunks_per_sample;
      total[0] += p[0];
      total[1] += p[1];
      for (int64_t part = 0; part < 3; ++part)
        for (int64_t j = 0; j < fg; ++j)
          total[2 + (part * l.b + sample) * fg + j] += p[2 + part * fg + j];
    }
    at::Tensor sums = at::empty({static_cast<int64_t>(total.size())}, x.options());
    float* sp = sums.data_ptr<float>();
    for (std::size_t i = 0; i < total.size(); ++i)
      sp[i] = all_finite ? static_cast<float>(total[i]) : std::numeric_limits<float>::quiet_NaN();
    ctx->save_for_backward({x, y, w});
    return sums;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &y = saved[1], &w = saved[2];
    const at::Tensor g = grads.at(0).to(at::kFloat).contiguous();
    const Layout l = layout_of(x);
    const int64_t fg = l.k - 1;
    at::Tensor dx = at::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const int64_t* yp = y.data_ptr<int64_t>();
    const float* wp = w.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    kernels::parallel_for(0, l.chunks(), 1, [&](int64_t begin, int64_t end) {
      auto scratch = std::make_unique<Scratch>(l.k);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t sample = i / l.chunks_per_sample;
        backward_chunk(l.chunk(xp, yp, i), wp, gp[0], gp + 2 + sample * fg,
                       gp + 2 + (l.b + sample) * fg, *scratch, dxp + sample * l.k * l.s);
      }
    });
    return {dx, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool softmax_loss_sums_supported(const at::Tensor& logits) {
  return logits.defined() && logits.device().is_cpu() && logits.scalar_type() == at::kFloat &&
         logits.dim() == 5;
}

at::Tensor softmax_loss_sums(const at::Tensor& logits, const at::Tensor& target,
                             const at::Tensor& class_weights) {
  const bool ok = softmax_loss_sums_supported(logits) && logits.size(1) >= 2 &&
                  target.device().is_cpu() && target.scalar_type() == at::kLong &&
                  target.dim() == 4 && target.size(0) == logits.size(0) &&
                  target.sizes().slice(1) == logits.sizes().slice(2) &&
                  class_weights.device().is_cpu() && class_weights.scalar_type() == at::kFloat &&
                  class_weights.dim() == 1 && class_weights.size(0) == logits.size(1);
  if (!ok)
    throw core::Error(fmt::format(
        "softmax_loss_sums: needs float32 CPU logits (B, K >= 2, D, H, W), int64 CPU target "
        "(B, D, H, W) and float32 CPU class weights (K); got logits {} {}, target {} {}, weights "
        "{} {}",
        c10::toString(logits.scalar_type()), fmt::join(logits.sizes(), "x"),
        c10::toString(target.scalar_type()), fmt::join(target.sizes(), "x"),
        c10::toString(class_weights.scalar_type()), fmt::join(class_weights.sizes(), "x")));
  return SoftmaxLossSums::apply(logits, target, class_weights);
}

}  // namespace scaffold::train
