// The loops of causal_attention (kernels/attention.hpp says what it computes). Every product is
// gemm() below: C (m x n) [+]= A (m x k) B (k x n) over row-major float buffers, n a multiple of
// 16, blocked as R rows x W vectors of accumulators held in registers.
//
// With a rotary embedding, queries and keys are rotated as they are read and their gradients
// rotated back (the transpose) as they are written.
//
// Forward, one task per (batch, head, 64-query block): Q (scaled), then for each key block up to
// the diagonal: S = Q K^T, the new running maximum m and sum l per row, P = e^(S - m) (zero where
// the key comes after the query), the output accumulator rescaled by e^(m_old - m) and P V added.
// The output is the accumulator over l; the row's log-sum-exp m + ln l is kept for the backward.
//
// Backward, one task per (batch, head), all in float32 buffers of the head's S rows: D_i = dO_i .
// O_i; for each key block j and each query block i >= j (FlashAttention-2's loop order, so dK and
// dV of the block stay in registers' reach and dQ accumulates over key blocks): P^T =
// e^(K Q^T * scale - lse) masked, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D) * scale,
// dK += dS^T Q, dQ += dS K.
#include "kernels/attention.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
// Named, not anonymous: the kernels library is a unity build.
namespace flash {

using simd::kVec;
using simd::loadv;
using simd::storev;
using simd::v16;

constexpr int64_t kBlock = 64;    // queries of a query block, keys of a key block
constexpr int64_t kLanes = kVec;  // floats of a vector, as an offset

struct Dims {
  int64_t batch, seq, heads, d;
  bool wide;            // AVX-512: 32 vector registers, room for 4 x 4 accumulator tiles
  const float* rotary;  // cos (S x d) then sin (S x d) of the rotary embedding; null: none

  int64_t qkv_row() const { return 3 * heads * d; }  // elements from one token's qkv to the next
  int64_t out_row() const { return heads * d; }
  int64_t blocks() const { return (seq + kBlock - 1) / kBlock; }
  int64_t padded() const { return blocks() * kBlock; }
};

SCAFFOLD_SIMD_INLINE float to_float(float x) {
  return x;
}
SCAFFOLD_SIMD_INLINE float to_float(uint16_t x) {
  return simd::from_bf16(x);
}
SCAFFOLD_SIMD_INLINE void put(float& to, float x) {
  to = x;
}
SCAFFOLD_SIMD_INLINE void put(uint16_t& to, float x) {
  to = simd::to_bf16(x);
}

// dst[0..d) = src's row, rotated as position `i`'s rotary embedding says where there is one
// (Megatron's halves: x cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1]), times mul.
template <typename T>
SCAFFOLD_SIMD_INLINE void load_row(const T* src, float* dst, const Dims& dm, int64_t i, float mul) {
  const int64_t d = dm.d, half = d / 2;
  if (dm.rotary == nullptr) {
    for (int64_t c = 0; c < d; ++c) dst[c] = to_float(src[c]) * mul;
    return;
  }
  const float *cos = dm.rotary + i * d, *sin = cos + dm.seq * d;
  for (int64_t c = 0; c < half; ++c)
    dst[c] = (to_float(src[c]) * cos[c] - to_float(src[c + half]) * sin[c]) * mul;
  for (int64_t c = half; c < d; ++c)
    dst[c] = (to_float(src[c]) * cos[c] + to_float(src[c - half]) * sin[c]) * mul;
}

// g[0..d) = the rotation's transpose applied to the gradient g of a rotated row (in place).
SCAFFOLD_SIMD_INLINE void unrotate(float* g, const Dims& dm, int64_t i) {
  if (dm.rotary == nullptr) return;
  const int64_t d = dm.d, half = d / 2;
  const float *cos = dm.rotary + i * d, *sin = cos + dm.seq * d;
  for (int64_t c = 0; c < half; ++c) {
    const float a = g[c], b = g[c + half];
    g[c] = a * cos[c] + b * sin[c + half];
    g[c + half] = b * cos[c + half] - a * sin[c];
  }
}

// C (R x 16W) [+]= A (R x k) B (k x 16W).
template <int R, int W>
SCAFFOLD_SIMD_INLINE void tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, int64_t k, bool add) {
  v16 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) acc[r][w] = add ? loadv(c + r * ldc + w * kLanes).v : v16{};
  for (int64_t p = 0; p < k; ++p) {
    v16 bv[W];
    for (int w = 0; w < W; ++w) bv[w] = loadv(b + p * ldb + w * kLanes).v;
    for (int r = 0; r < R; ++r) {
      const float av = a[r * lda + p];
      for (int w = 0; w < W; ++w) acc[r][w] += av * bv[w];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) storev(c + r * ldc + w * kLanes, acc[r][w]);
}

// R rows of C, all n columns.
template <int R, int W>
SCAFFOLD_SIMD_INLINE void row_block(const float* a, int64_t lda, const float* b, int64_t ldb,
                                    float* c, int64_t ldc, int64_t k, int64_t n, bool add) {
  int64_t j = 0;
  for (; j + W * kLanes <= n; j += W * kLanes) tile<R, W>(a, lda, b + j, ldb, c + j, ldc, k, add);
  for (; j < n; j += kLanes) tile<R, 1>(a, lda, b + j, ldb, c + j, ldc, k, add);
}

template <int R, int W>
SCAFFOLD_SIMD_INLINE void gemm_blocked(const float* a, int64_t lda, const float* b, int64_t ldb,
                                       float* c, int64_t ldc, int64_t m, int64_t k, int64_t n,
                                       bool add) {
  int64_t i = 0;
  for (; i + R <= m; i += R) row_block<R, W>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, k, n, add);
  for (; i < m; ++i) row_block<1, W>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, k, n, add);
}

// C (m x n) [+]= A (m x k) B (k x n); n a multiple of 16.
SCAFFOLD_SIMD_INLINE void gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, int64_t m, int64_t k, int64_t n, bool add, bool wide) {
  if (wide)
    gemm_blocked<4, 4>(a, lda, b, ldb, c, ldc, m, k, n, add);
  else
    gemm_blocked<2, 2>(a, lda, b, ldb, c, ldc, m, k, n, add);
}

// The sum of x[0..n) in 16 independent partial sums (a loop that vectorises).
SCAFFOLD_SIMD_INLINE float sum_of(const float* x, int64_t n) {
  float lanes[kVec] = {};
  int64_t j = 0;
  for (; j + kVec <= n; j += kVec)
    for (int l = 0; l < kVec; ++l) lanes[l] += x[j + l];
  for (; j < n; ++j) lanes[0] += x[j];
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

// The forward's scratch, in floats: Q, V and the accumulator (64 x d each), K^T (d x 64), the
// score tile (64 x 64), the running maximum and sum (64 each), one key row.
int64_t forward_scratch(const Dims& dm) {
  return 4 * kBlock * dm.d + kBlock * kBlock + 2 * kBlock + dm.d;
}

// One (batch, head, query block) of the forward.
template <typename T>
SCAFFOLD_SIMD_INLINE void forward_task(const T* qkv, T* out, float* lse, const Dims& dm,
                                       float scale, int64_t task, float* work) {
  const int64_t d = dm.d, row = dm.qkv_row(), nq = dm.blocks();
  const int64_t qb = task % nq, bh = task / nq, h = bh % dm.heads, b = bh / dm.heads;
  const int64_t i0 = qb * kBlock, mq = std::min(kBlock, dm.seq - i0);
  const T* base = qkv + b * dm.seq * row + h * 3 * d;  // token 0's query of this head
  float *q = work, *kt = q + kBlock * d, *v = kt + kBlock * d, *acc = v + kBlock * d;
  float *s = acc + kBlock * d, *mx = s + kBlock * kBlock, *l = mx + kBlock, *key = l + kBlock;

  for (int64_t r = 0; r < mq; ++r) load_row(base + (i0 + r) * row, q + r * d, dm, i0 + r, scale);
  std::fill(acc, acc + kBlock * d, 0.0f);
  std::fill(mx, mx + kBlock, std::numeric_limits<float>::lowest());
  std::fill(l, l + kBlock, 0.0f);

  for (int64_t kb = 0; kb <= qb; ++kb) {
    const int64_t j0 = kb * kBlock, nk = std::min(kBlock, dm.seq - j0);
    for (int64_t j = 0; j < kBlock; ++j) {
      if (j < nk)
        load_row(base + (j0 + j) * row + d, key, dm, j0 + j, 1.0f);
      else
        std::fill(key, key + d, 0.0f);
      const T* value = base + (j0 + j) * row + 2 * d;
      for (int64_t c = 0; c < d; ++c) {
        kt[c * kBlock + j] = key[c];
        v[j * d + c] = j < nk ? to_float(value[c]) : 0.0f;
      }
    }
    gemm(q, d, kt, kBlock, s, kBlock, mq, d, kBlock, false, dm.wide);  // S = (Q scale) K^T
    for (int64_t r = 0; r < mq; ++r) {
      float* srow = s + r * kBlock;
      const int64_t valid = std::min(nk, i0 + r - j0 + 1);  // keys up to the query's position
      float m = mx[r];
      for (int64_t j = 0; j < valid; ++j) m = std::max(m, srow[j]);
      for (int64_t j = 0; j < kBlock; ++j)
        srow[j] = j < valid ? simd::exp_approx(srow[j] - m) : 0.0f;
      const float rescale = simd::exp_approx(mx[r] - m);
      l[r] = l[r] * rescale + sum_of(srow, valid);
      mx[r] = m;
      for (int64_t c = 0; c < d; ++c) acc[r * d + c] *= rescale;
    }
    gemm(s, kBlock, v, d, acc, d, mq, nk, d, true, dm.wide);  // acc += P V
  }
  T* o = out + (b * dm.seq + i0) * dm.out_row() + h * d;
  float* lse_row = lse + bh * dm.seq + i0;
  for (int64_t r = 0; r < mq; ++r) {
    const float inv = 1.0f / l[r];
    for (int64_t c = 0; c < d; ++c) put(o[r * dm.out_row() + c], acc[r * d + c] * inv);
    lse_row[r] = mx[r] + std::log(l[r]);
  }
}

// The backward's scratch, in floats: Q, K, V, dO and dQ (padded x d each), Q^T and dO^T (d x
// padded), D and the log-sum-exps (padded each), four 64 x 64 tiles (P^T, dP^T, dS^T, dS) and the
// key block's dK and dV (64 x d each).
int64_t backward_scratch(const Dims& dm) {
  const int64_t sp = dm.padded();
  return 7 * sp * dm.d + 2 * sp + 4 * kBlock * kBlock + 2 * kBlock * dm.d;
}

// One (batch, head) of the backward.
template <typename T>
SCAFFOLD_SIMD_INLINE void backward_task(const T* qkv, const T* out, const T* dout, const float* lse,
                                        T* dqkv, const Dims& dm, float scale, int64_t task,
                                        float* work) {
  const int64_t d = dm.d, row = dm.qkv_row(), orow = dm.out_row(), sp = dm.padded();
  const int64_t nb = dm.blocks(), h = task % dm.heads, b = task / dm.heads;
  const T* base = qkv + b * dm.seq * row + h * 3 * d;
  const T* o_base = out + b * dm.seq * orow + h * d;
  const T* do_base = dout + b * dm.seq * orow + h * d;
  T* dbase = dqkv + b * dm.seq * row + h * 3 * d;
  float *q = work, *k = q + sp * d, *v = k + sp * d, *dout_f = v + sp * d, *dq = dout_f + sp * d;
  float *qt = dq + sp * d, *dot = qt + sp * d, *dd = dot + sp * d, *lse_f = dd + sp;
  float *pt = lse_f + sp, *dpt = pt + kBlock * kBlock, *dst = dpt + kBlock * kBlock;
  float *ds = dst + kBlock * kBlock, *dk = ds + kBlock * kBlock, *dv = dk + kBlock * d;

  for (int64_t i = 0; i < sp; ++i) {
    const bool in = i < dm.seq;
    if (in) {
      load_row(base + i * row, q + i * d, dm, i, 1.0f);
      load_row(base + i * row + d, k + i * d, dm, i, 1.0f);
    } else {
      std::fill(q + i * d, q + (i + 1) * d, 0.0f);
      std::fill(k + i * d, k + (i + 1) * d, 0.0f);
    }
    float dsum = 0.0f;
    for (int64_t c = 0; c < d; ++c) {
      v[i * d + c] = in ? to_float(base[i * row + 2 * d + c]) : 0.0f;
      dout_f[i * d + c] = in ? to_float(do_base[i * orow + c]) : 0.0f;
      dsum += in ? dout_f[i * d + c] * to_float(o_base[i * orow + c]) : 0.0f;
      qt[c * sp + i] = q[i * d + c];
      dot[c * sp + i] = dout_f[i * d + c];
    }
    dd[i] = dsum;
    lse_f[i] = in ? lse[task * dm.seq + i] : 0.0f;
  }
  std::fill(dq, dq + sp * d, 0.0f);

  for (int64_t kb = 0; kb < nb; ++kb) {
    const int64_t j0 = kb * kBlock, nk = std::min(kBlock, dm.seq - j0);
    const float *kj = k + j0 * d, *vj = v + j0 * d;
    std::fill(dk, dk + kBlock * d, 0.0f);
    std::fill(dv, dv + kBlock * d, 0.0f);
    for (int64_t qb = kb; qb < nb; ++qb) {
      const int64_t i0 = qb * kBlock;
      gemm(kj, d, qt + i0, sp, pt, kBlock, nk, d, kBlock, false, dm.wide);  // K Q^T
      for (int64_t j = 0; j < nk; ++j) {
        // Query i of the block sees key j when j0 + j <= i0 + i, and exists when i0 + i < S.
        const int64_t first = j0 + j - i0, end = dm.seq - i0;
        float* p = pt + j * kBlock;
        for (int64_t i = 0; i < kBlock; ++i) {
          const float e = simd::exp_approx(p[i] * scale - lse_f[i0 + i]);
          p[i] = i >= first && i < end ? e : 0.0f;
        }
      }
      gemm(pt, kBlock, dout_f + i0 * d, d, dv, d, nk, kBlock, d, true, dm.wide);  // dV += P^T dO
      gemm(vj, d, dot + i0, sp, dpt, kBlock, nk, d, kBlock, false, dm.wide);      // V dO^T
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t i = 0; i < kBlock; ++i)
          dst[j * kBlock + i] =
              pt[j * kBlock + i] * (dpt[j * kBlock + i] - dd[i0 + i]) * scale;  // dS^T
      gemm(dst, kBlock, q + i0 * d, d, dk, d, nk, kBlock, d, true, dm.wide);    // dK += dS^T Q
      for (int64_t i = 0; i < kBlock; ++i)
        for (int64_t j = 0; j < nk; ++j) ds[i * kBlock + j] = dst[j * kBlock + i];
      gemm(ds, kBlock, kj, d, dq + i0 * d, d, kBlock, nk, d, true, dm.wide);  // dQ += dS K
    }
    for (int64_t j = 0; j < nk; ++j) {
      unrotate(dk + j * d, dm, j0 + j);
      for (int64_t c = 0; c < d; ++c) {
        put(dbase[(j0 + j) * row + d + c], dk[j * d + c]);
        put(dbase[(j0 + j) * row + 2 * d + c], dv[j * d + c]);
      }
    }
  }
  for (int64_t i = 0; i < dm.seq; ++i) {
    unrotate(dq + i * d, dm, i);
    for (int64_t c = 0; c < d; ++c) put(dbase[i * row + c], dq[i * d + c]);
  }
}

// The tasks [begin, end) of one thread, per dtype (bf16 as its bits), compiled per ISA.
SCAFFOLD_SIMD_CLONES void forward_tasks(const float* qkv, float* out, float* lse, const Dims& dm,
                                        float scale, int64_t begin, int64_t end, float* work) {
  for (int64_t t = begin; t < end; ++t) forward_task(qkv, out, lse, dm, scale, t, work);
}
SCAFFOLD_SIMD_CLONES void forward_tasks(const uint16_t* qkv, uint16_t* out, float* lse,
                                        const Dims& dm, float scale, int64_t begin, int64_t end,
                                        float* work) {
  for (int64_t t = begin; t < end; ++t) forward_task(qkv, out, lse, dm, scale, t, work);
}
SCAFFOLD_SIMD_CLONES void backward_tasks(const float* qkv, const float* out, const float* dout,
                                         const float* lse, float* dqkv, const Dims& dm, float scale,
                                         int64_t begin, int64_t end, float* work) {
  for (int64_t t = begin; t < end; ++t)
    backward_task(qkv, out, dout, lse, dqkv, dm, scale, t, work);
}
SCAFFOLD_SIMD_CLONES void backward_tasks(const uint16_t* qkv, const uint16_t* out,
                                         const uint16_t* dout, const float* lse, uint16_t* dqkv,
                                         const Dims& dm, float scale, int64_t begin, int64_t end,
                                         float* work) {
  for (int64_t t = begin; t < end; ++t)
    backward_task(qkv, out, dout, lse, dqkv, dm, scale, t, work);
}

Dims dims_of(const at::Tensor& qkv, int64_t heads, const at::Tensor& rotary) {
  return {qkv.size(0),
          qkv.size(1),
          heads,
          qkv.size(2) / (3 * heads),
          simd::wide_registers(),
          rotary.numel() > 0 ? rotary.data_ptr<float>() : nullptr};
}

template <typename T>
T* data(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

template <typename T>
void run_forward(const at::Tensor& qkv, at::Tensor& out, at::Tensor& lse, const Dims& dm,
                 float scale) {
  const T* pqkv = data<const T>(qkv);
  T* pout = data<T>(out);
  float* plse = lse.data_ptr<float>();
  kernels::parallel_for(0, dm.batch * dm.heads * dm.blocks(), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> work(forward_scratch(dm));
    forward_tasks(pqkv, pout, plse, dm, scale, begin, end, work.data());
  });
}

template <typename T>
void run_backward(const at::Tensor& qkv, const at::Tensor& out, const at::Tensor& dout,
                  const at::Tensor& lse, at::Tensor& dqkv, const Dims& dm, float scale) {
  const T *pqkv = data<const T>(qkv), *pout = data<const T>(out), *pdout = data<const T>(dout);
  const float* plse = lse.data_ptr<float>();
  T* pdqkv = data<T>(dqkv);
  kernels::parallel_for(0, dm.batch * dm.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> work(backward_scratch(dm));
    backward_tasks(pqkv, pout, pdout, plse, pdqkv, dm, scale, begin, end, work.data());
  });
}

class CausalAttention : public torch::autograd::Function<CausalAttention> {
 public:
  // rotary: (2, S, d) float32 cos and sin, or empty for none (LibTorch 1.13's functions take no
  // undefined tensors).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            const at::Tensor& rotary, int64_t heads, double scale) {
    const Dims dm = dims_of(qkv, heads, rotary);
    at::Tensor out = at::empty({dm.batch, dm.seq, dm.out_row()}, qkv.options());
    at::Tensor lse = at::empty({dm.batch, dm.heads, dm.seq}, qkv.options().dtype(at::kFloat));
    if (qkv.scalar_type() == at::kBFloat16)
      run_forward<uint16_t>(qkv, out, lse, dm, static_cast<float>(scale));
    else
      run_forward<float>(qkv, out, lse, dm, static_cast<float>(scale));
    ctx->save_for_backward({qkv, out, lse, rotary});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qkv = saved[0], &out = saved[1], &lse = saved[2], &rotary = saved[3];
    const Dims dm = dims_of(qkv, ctx->saved_data["heads"].toInt(), rotary);
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const at::Tensor dout = grads.at(0).to(qkv.scalar_type()).contiguous();
    at::Tensor dqkv = at::empty_like(qkv, at::MemoryFormat::Contiguous);
    if (qkv.scalar_type() == at::kBFloat16)
      run_backward<uint16_t>(qkv, out, dout, lse, dqkv, dm, scale);
    else
      run_backward<float>(qkv, out, dout, lse, dqkv, dm, scale);
    return {dqkv, torch::autograd::Variable(), torch::autograd::Variable(),
            torch::autograd::Variable()};
  }
};

}  // namespace flash

std::string causal_attention_unsupported(const at::Tensor& qkv, int64_t heads,
                                         const at::Tensor& rotary) {
  if (!qkv.defined()) return "an undefined tensor";
  if (!qkv.device().is_cpu()) return "not on the CPU";
  if (qkv.scalar_type() != at::kFloat && qkv.scalar_type() != at::kBFloat16)
    return "not float32 or bfloat16";
  if (qkv.dim() != 3 || heads < 1 || qkv.size(2) % (3 * heads) != 0)
    return fmt::format("not (B, S, heads * 3 * d) with {} heads", heads);
  if ((qkv.size(2) / (3 * heads)) % simd::kVec != 0)
    return fmt::format("head size {} is not a multiple of {}", qkv.size(2) / (3 * heads),
                       simd::kVec);
  if (rotary.defined() &&
      (rotary.scalar_type() != at::kFloat || !rotary.device().is_cpu() ||
       rotary.sizes() != at::IntArrayRef{2, qkv.size(1), qkv.size(2) / (3 * heads)}))
    return fmt::format("rotary tables {} {} are not float32 (2, {}, {}) on the CPU",
                       fmt::join(rotary.sizes(), "x"), c10::toString(rotary.scalar_type()),
                       qkv.size(1), qkv.size(2) / (3 * heads));
  return "";
}

at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads, double scale,
                            const at::Tensor& rotary) {
  const std::string why = causal_attention_unsupported(qkv, heads, rotary);
  if (!why.empty())
    throw core::Error(fmt::format("causal_attention: unsupported qkv ({} {} on {}): {}",
                                  fmt::join(qkv.sizes(), "x"), c10::toString(qkv.scalar_type()),
                                  qkv.device().str(), why));
  const at::Tensor tables =
      rotary.defined() ? rotary.contiguous() : at::empty({0}, qkv.options().dtype(at::kFloat));
  return flash::CausalAttention::apply(qkv.contiguous(), tables, heads, scale);
}

}  // namespace scaffold::kernels
