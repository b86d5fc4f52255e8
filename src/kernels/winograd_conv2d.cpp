// Winograd F(4x4, 3x3) convolution of winograd_conv2d.hpp, channels-last (NHWC). Each thread
// stages the input rows its tiles read (with a zero voxel before and after), so every transform
// runs on vectors of 16 contiguous channels; the schedules (blocks of tiles in L2, chunks for the
// wide layers) are winograd_schedule.hpp's, shared with the 3-D kernel, and so is the groups
// schedule (wide layers with few tiles), which only this kernel takes. Matrices of F(4,3)
// (Lavin and Gray, 2016):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// applied along H and W in turn; point p = i * 6 + j, i along H.
#include "kernels/winograd_conv2d.hpp"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/conv1x1.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/parallel.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_conv.hpp"
#include "kernels/winograd_schedule.hpp"

namespace scaffold::kernels {
// A namespace of its own: the kernels build as one unity source, and the 3-D kernel's helpers
// have the same names.
namespace f43 {
namespace {

using simd::kVec;
using simd::loadv;
using simd::storev;
using simd::v16;

constexpr int kPoints = 36;  // 6 x 6 transformed points per tile

// --- Transforms (per vector of 16 channels) ----------------------------------------------------

// Row R of B^T (6 -> 6), of A^T (6 -> 4) and of A (4 -> 6).
template <int R>
SCAFFOLD_SIMD_INLINE void bt_row(const v16 (&x)[6], v16& r) {
  if constexpr (R == 0) r = (x[0] * 4.0f - x[2] * 5.0f) + x[4];
  if constexpr (R == 1) r = (x[3] + x[4]) - (x[1] + x[2]) * 4.0f;
  if constexpr (R == 2) r = (x[4] - x[3]) + (x[1] - x[2]) * 4.0f;
  if constexpr (R == 3) r = (x[4] - x[2]) + (x[3] - x[1]) * 2.0f;
  if constexpr (R == 4) r = (x[4] - x[2]) + (x[1] - x[3]) * 2.0f;
  if constexpr (R == 5) r = (x[1] * 4.0f - x[3] * 5.0f) + x[5];
}
SCAFFOLD_SIMD_INLINE void bt6(v16 (&x)[6]) {
  v16 r[6];
  bt_row<0>(x, r[0]);
  bt_row<1>(x, r[1]);
  bt_row<2>(x, r[2]);
  bt_row<3>(x, r[3]);
  bt_row<4>(x, r[4]);
  bt_row<5>(x, r[5]);
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) x[i] = r[i];
}
template <int R>
SCAFFOLD_SIMD_INLINE void at_row(const v16 (&x)[6], v16& r) {
  if constexpr (R == 0) r = ((x[0] + x[1]) + (x[2] + x[3])) + x[4];
  if constexpr (R == 1) r = (x[1] - x[2]) + (x[3] - x[4]) * 2.0f;
  if constexpr (R == 2) r = (x[1] + x[2]) + (x[3] + x[4]) * 4.0f;
  if constexpr (R == 3) r = ((x[1] - x[2]) + (x[3] - x[4]) * 8.0f) + x[5];
}
template <int R>
SCAFFOLD_SIMD_INLINE void a_row(const v16& x0, const v16& x1, const v16& x2, const v16& x3,
                                v16& r) {
  if constexpr (R == 0) r = x0;
  if constexpr (R == 1) r = (x0 + x1) + (x2 + x3);
  if constexpr (R == 2) r = (x0 - x1) + (x2 - x3);
  if constexpr (R == 3) r = (x0 + x1 * 2.0f) + (x2 * 4.0f + x3 * 8.0f);
  if constexpr (R == 4) r = (x0 - x1 * 2.0f) + (x2 * 4.0f - x3 * 8.0f);
  if constexpr (R == 5) r = x3;
}
SCAFFOLD_SIMD_INLINE void a6(const v16& x0, const v16& x1, const v16& x2, const v16& x3,
                             v16 (&r)[6]) {
  a_row<0>(x0, x1, x2, x3, r[0]);
  a_row<1>(x0, x1, x2, x3, r[1]);
  a_row<2>(x0, x1, x2, x3, r[2]);
  a_row<3>(x0, x1, x2, x3, r[3]);
  a_row<4>(x0, x1, x2, x3, r[4]);
  a_row<5>(x0, x1, x2, x3, r[5]);
}

// An activation (N, C, H, W) in channels-last memory and its grid of 4x4 tiles, numbered
// (n * th + ty) * tw + tx.
struct Grid {
  int64_t n, h, w, c;
  int64_t th, tw;
  Grid(int64_t n_, int64_t h_, int64_t w_, int64_t c_)
      : n(n_), h(h_), w(w_), c(c_), th((h_ + 3) / 4), tw((w_ + 3) / 4) {}
  int64_t tiles() const { return n * th * tw; }
  Grid with_channels(int64_t channels) const { return Grid(n, h, w, channels); }
};

// Tiles a .. b of tile row (n, ty), the first of them tile number t.
struct TileRow {
  int64_t n, ty, a, b, t;
};

// The run of tiles from `begin` (before `end`) that lies in begin's tile row.
SCAFFOLD_SIMD_INLINE TileRow tile_row(const Grid& g, int64_t begin, int64_t end) {
  const int64_t a = begin % g.tw, row = begin / g.tw;
  const int64_t b = std::min(g.tw, a + (end - begin));
  return TileRow{row / g.th, row % g.th, a, b, begin};
}

// The input rows one thread's tiles read, with a zero voxel before and after: slot y mod 8 holds
// row (n, y) over w = -1 .. 4 tw; a tile row's 6 rows have distinct slots, and the next tile row
// finds two of them staged. Rows outside the image read a row of zeros.
class InputRows {
 public:
  InputRows(const float* x, const Grid& g)
      : x_(x), g_(g), width_((4 * g.tw + 2) * g.c), buf_(static_cast<std::size_t>(9 * width_)) {
    std::fill(tag_, tag_ + 8, int64_t{-1});
  }
  SCAFFOLD_SIMD_INLINE const float* row(int64_t n, int64_t y) {
    float* zero = buf_.data() + 8 * width_;  // zero-initialised, never written
    if (y < 0 || y >= g_.h) return zero;
    const int64_t slot = y & 7, key = n * g_.h + y;
    float* r = buf_.data() + slot * width_;
    if (tag_[slot] != key) {
      tag_[slot] = key;
      std::memset(r, 0, sizeof(float) * g_.c);
      std::memcpy(r + g_.c, x_ + key * g_.w * g_.c, sizeof(float) * g_.w * g_.c);
      std::memset(r + (g_.w + 1) * g_.c, 0, sizeof(float) * (width_ - (g_.w + 1) * g_.c));
    }
    return r;
  }

 private:
  const float* x_;
  Grid g_;
  int64_t width_;
  std::vector<float> buf_;
  int64_t tag_[8];
};

// Column K (the W point) of a transformed input tile whose row i starts at rows[i] + off (c
// floats per voxel): B^T row K along W of each row, then B^T along H, stored to
// v + (i * 6 + K) * vs. Each column reloads the row's six voxels (from L1), so nothing spills.
template <int K>
SCAFFOLD_SIMD_INLINE void input_column(const float* const (&rows)[6], int64_t off, int64_t c,
                                       float* v, int64_t vs) {
  v16 a[6];
#pragma GCC unroll 6
  for (int q = 0; q < 6; ++q) {
    const float* row = rows[q] + off;
    v16 x[6];
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) x[j] = loadv(row + j * c).v;
    bt_row<K>(x, a[q]);
  }
  bt6(a);
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) storev(v + (i * 6 + K) * vs, a[i]);
}

// The 6x6 input tile whose row i starts at rows[i] + off, transformed to V: point p's c values
// at v + p * v_stride.
SCAFFOLD_SIMD_INLINE void input_tile(const float* const (&rows)[6], int64_t off, int64_t c,
                                     float* v, int64_t v_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    input_column<0>(rows, off + cc, c, v + cc, v_stride);
    input_column<1>(rows, off + cc, c, v + cc, v_stride);
    input_column<2>(rows, off + cc, c, v + cc, v_stride);
    input_column<3>(rows, off + cc, c, v + cc, v_stride);
    input_column<4>(rows, off + cc, c, v + cc, v_stride);
    input_column<5>(rows, off + cc, c, v + cc, v_stride);
  }
}

// The 36 products of one tile (point p at m + p * m_stride, c values) transformed by A^T along W
// and H to its 4x4 output voxels: voxel (i, k) at out + i * row_stride + k * c.
SCAFFOLD_SIMD_INLINE void output_tile(const float* m, int64_t m_stride, int64_t c, float* out,
                                      int64_t row_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    v16 r[4][6];  // [k][i]: each row of points transformed along W
    const float* q = m + cc;
#pragma GCC unroll 1
    for (int i = 0; i < 6; ++i, q += 6 * m_stride) {
      v16 x[6];
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) x[j] = loadv(q + j * m_stride).v;
      at_row<0>(x, r[0][i]);
      at_row<1>(x, r[1][i]);
      at_row<2>(x, r[2][i]);
      at_row<3>(x, r[3][i]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      float* o = out + k * c + cc;
      v16 t;
      at_row<0>(r[k], t);
      storev(o, t);
      at_row<1>(r[k], t);
      storev(o + row_stride, t);
      at_row<2>(r[k], t);
      storev(o + 2 * row_stride, t);
      at_row<3>(r[k], t);
      storev(o + 3 * row_stride, t);
    }
  }
}

// The output gradient of one tile, voxel (i, k) at in + i * row_stride + k * c, as the 36 points
// A dY A^T at dm + p * dm_stride.
SCAFFOLD_SIMD_INLINE void grad_output_tile(const float* in, int64_t row_stride, int64_t c,
                                           float* dm, int64_t dm_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    v16 f[4][6];  // [k][i]: A along H of each column k
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const float* s = in + k * c + cc;
      a6(loadv(s).v, loadv(s + row_stride).v, loadv(s + 2 * row_stride).v,
         loadv(s + 3 * row_stride).v, f[k]);
    }
    float* o = dm + cc;
#pragma GCC unroll 1
    for (int i = 0; i < 6; ++i, o += 6 * dm_stride) {
      v16 t[6];
      a6(f[0][i], f[1][i], f[2][i], f[3][i], t);
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) storev(o + j * dm_stride, t[j]);
    }
  }
}

// --- Weights ---------------------------------------------------------------------------------

// G along one axis (3 -> 6) and its transpose (6 -> 3), for vectors.
SCAFFOLD_SIMD_INLINE void g6(const v16& s0, const v16& s1, const v16& s2, v16 (&d)[6]) {
  const v16 even = s0 + s2, e24 = s0 * (1.0f / 24.0f) + s2 * (1.0f / 6.0f);
  d[0] = s0 * 0.25f;
  d[1] = (even + s1) * (-1.0f / 6.0f);
  d[2] = (even - s1) * (-1.0f / 6.0f);
  d[3] = e24 + s1 * (1.0f / 12.0f);
  d[4] = e24 - s1 * (1.0f / 12.0f);
  d[5] = s2;
}
SCAFFOLD_SIMD_INLINE void gt3(const v16& u0, const v16& u1, const v16& u2, const v16& u3,
                              const v16& u4, const v16& u5, v16 (&e)[3]) {
  const v16 p12 = u1 + u2, p34 = u3 + u4;
  e[0] = u0 * 0.25f - p12 * (1.0f / 6.0f) + p34 * (1.0f / 24.0f);
  e[1] = (u2 - u1) * (1.0f / 6.0f) + (u3 - u4) * (1.0f / 12.0f);
  e[2] = (p34 - p12) * (1.0f / 6.0f) + u5;
}

// The 36 rows U[p][ci][.] of one input channel from its weights wt (9, O) ([tap][co]), 16 output
// channels per vector; row p at u + p * u_stride.
SCAFFOLD_SIMD_CLONES void transform_channel(const float* wt, int64_t o, float* u,
                                            int64_t u_stride) {
  for (int64_t co = 0; co < o; co += kVec) {
    v16 a[3][6];  // [kh][j]: G along W
    for (int i = 0; i < 3; ++i) {
      const float* taps = wt + int64_t{i} * 3 * o + co;  // (kh = i, kw = 0..2)
      g6(loadv(taps).v, loadv(taps + o).v, loadv(taps + 2 * o).v, a[i]);
    }
    for (int j = 0; j < 6; ++j) {
      v16 d[6];
      g6(a[0][j], a[1][j], a[2][j], d);
      for (int i = 0; i < 6; ++i) storev(u + (i * 6 + j) * u_stride + co, d[i]);
    }
  }
}

// The adjoint for one input channel: dwt (9, O) of ci from the 36 rows dU[p][ci][.] at
// du + p * du_stride.
SCAFFOLD_SIMD_CLONES void gradient_channel(const float* du, int64_t du_stride, int64_t o,
                                           float* dwt) {
  for (int64_t co = 0; co < o; co += kVec) {
    v16 b[3][6];  // [kh][j]: G^T along H
    for (int j = 0; j < 6; ++j) {
      v16 e[3];
      gt3(loadv(du + j * du_stride + co).v, loadv(du + (6 + j) * du_stride + co).v,
          loadv(du + (12 + j) * du_stride + co).v, loadv(du + (18 + j) * du_stride + co).v,
          loadv(du + (24 + j) * du_stride + co).v, loadv(du + (30 + j) * du_stride + co).v, e);
      for (int i = 0; i < 3; ++i) b[i][j] = e[i];
    }
    for (int i = 0; i < 3; ++i) {
      v16 e[3];
      gt3(b[i][0], b[i][1], b[i][2], b[i][3], b[i][4], b[i][5], e);
      for (int k = 0; k < 3; ++k) storev(dwt + (i * 3 + k) * o + co, e[k]);
    }
  }
}

// G's rows (6 x 3): point i along an axis is sum_k kG[i][k] w[k].
constexpr float kG[6][3] = {{0.25f, 0.0f, 0.0f},
                            {-1.0f / 6.0f, -1.0f / 6.0f, -1.0f / 6.0f},
                            {-1.0f / 6.0f, 1.0f / 6.0f, -1.0f / 6.0f},
                            {1.0f / 24.0f, 1.0f / 12.0f, 1.0f / 6.0f},
                            {1.0f / 24.0f, -1.0f / 12.0f, 1.0f / 6.0f},
                            {0.0f, 0.0f, 1.0f}};

// The groups schedule's pieces (winograd_schedule.hpp): group i is the 6 points (i, 0..5), row i
// along H. transform_channel for those rows only: row (i, j) at u + j * u_stride.
SCAFFOLD_SIMD_CLONES void transform_group(const float* wt, int64_t o, float* u, int64_t u_stride,
                                          int group) {
  const float g0 = kG[group][0], g1 = kG[group][1], g2 = kG[group][2];
  for (int64_t co = 0; co < o; co += kVec) {
    v16 a[3][6];  // [kh][j]: G along W
    for (int i = 0; i < 3; ++i) {
      const float* taps = wt + int64_t{i} * 3 * o + co;
      g6(loadv(taps).v, loadv(taps + o).v, loadv(taps + 2 * o).v, a[i]);
    }
    for (int j = 0; j < 6; ++j) {
      const v16 d = (a[0][j] * g0 + a[1][j] * g1) + a[2][j] * g2;
      storev(u + j * u_stride + co, d);
    }
  }
}

// gradient_channel's share of group i's rows (i, j) at du + j * du_stride: G^T along W, then
// each tap row kh gets kG[i][kh] of it, written (the first group) or added to dwt (9, O).
SCAFFOLD_SIMD_CLONES void gradient_group(const float* du, int64_t du_stride, int64_t o, int group,
                                         float* dwt, bool accumulate) {
  for (int64_t co = 0; co < o; co += kVec) {
    v16 e[3];
    gt3(loadv(du + co).v, loadv(du + du_stride + co).v, loadv(du + 2 * du_stride + co).v,
        loadv(du + 3 * du_stride + co).v, loadv(du + 4 * du_stride + co).v,
        loadv(du + 5 * du_stride + co).v, e);
    for (int kh = 0; kh < 3; ++kh) {
      const float gk = kG[group][kh];
      for (int kw = 0; kw < 3; ++kw) {
        float* d = dwt + (kh * 3 + kw) * o + co;
        const v16 add = e[kw] * gk;
        storev(d, accumulate ? loadv(d).v + add : add);
      }
    }
  }
}

// U[p][ci][co] = (G w[co][ci] G^T)[p] for w (O, C, 3, 3).
at::Tensor transform_weights(const at::Tensor& w) {
  return winograd::transform_weights<kPoints, 9>(w, &transform_channel);
}

// dw (O, C, 3, 3) = G^T dU[.][ci][co] G for dU (36, C, O): the adjoint of
// transform_weights.
at::Tensor weights_gradient(const float* du, int64_t o, int64_t c) {
  return winograd::weights_gradient<9>(du, o, c, {3, 3}, &gradient_channel);
}

// --- Passes (winograd_schedule.hpp) ---------------------------------------------------------

using winograd::point_stride;

// Tiles t0 + begin .. t0 + end of a chunk laid out for `nt` tiles: point p of chunk tile t at
// v + p * point_stride(nt, channels) + t * channels.
SCAFFOLD_SIMD_CLONES void input_tiles(InputRows& rows, const Grid& g, int64_t t0, int64_t nt,
                                      int64_t begin, int64_t end, float* v) {
  const int64_t vs = point_stride(nt, g.c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(g, t, t0 + end);
    t += r.b - r.a;
    const float* src[6];
    for (int q = 0; q < 6; ++q) src[q] = rows.row(r.n, 4 * r.ty - 1 + q);
    for (int64_t tx = r.a; tx < r.b; ++tx)
      input_tile(src, 4 * tx * g.c, g.c, v + (r.t + tx - r.a - t0) * g.c, vs);
  }
}

// `stage` holds 4 rows of 4 tw voxels: a tile row's output gradient, zero past the edge.
SCAFFOLD_SIMD_CLONES void grad_output_tiles(const float* dy, const Grid& gy, int64_t t0, int64_t nt,
                                            int64_t begin, int64_t end, float* m, float* stage) {
  const int64_t c = gy.c, ms = point_stride(nt, c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(gy, t, t0 + end);
    t += r.b - r.a;
    const int64_t bw = 4 * (r.b - r.a), w0 = 4 * r.a, w1 = std::min(4 * r.b, gy.w);
    for (int q = 0; q < 4; ++q) {
      float* row = stage + q * bw * c;
      const int64_t y = 4 * r.ty + q;
      const int64_t filled = y < gy.h ? w1 - w0 : 0;
      if (filled > 0)
        std::memcpy(row, dy + ((r.n * gy.h + y) * gy.w + w0) * c, sizeof(float) * filled * c);
      std::memset(row + filled * c, 0, sizeof(float) * (bw - filled) * c);
    }
    for (int64_t tx = r.a; tx < r.b; ++tx)
      grad_output_tile(stage + 4 * (tx - r.a) * c, bw * c, c, m + (r.t + tx - r.a - t0) * c, ms);
  }
}

// `stage` as for grad_output_tiles: a tile row's output, written to y once the row is done.
SCAFFOLD_SIMD_CLONES void output_tiles(const float* m, const Grid& gy, int64_t t0, int64_t nt,
                                       int64_t begin, int64_t end, float* y, float* stage) {
  const int64_t c = gy.c, ms = point_stride(nt, c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(gy, t, t0 + end);
    t += r.b - r.a;
    const int64_t bw = 4 * (r.b - r.a), w0 = 4 * r.a, w1 = std::min(4 * r.b, gy.w);
    for (int64_t tx = r.a; tx < r.b; ++tx)
      output_tile(m + (r.t + tx - r.a - t0) * c, ms, c, stage + 4 * (tx - r.a) * c, bw * c);
    for (int q = 0; q < 4; ++q) {
      const int64_t yy = 4 * r.ty + q;
      if (yy < gy.h)
        std::memcpy(y + ((r.n * gy.h + yy) * gy.w + w0) * c, stage + q * bw * c,
                    sizeof(float) * (w1 - w0) * c);
    }
  }
}

int64_t stage_floats(const Grid& g) {
  return g.tw * g.c * 16;  // 4 rows of 4 tw voxels
}

// The 2-D kernel as winograd_schedule.hpp's schedules see it.
struct Scheme {
  static constexpr int kPoints = f43::kPoints;
  static constexpr int kGroups = 6;  // rows of 6 points: the groups schedule
  static constexpr int kTaps = 9;
  static std::array<int64_t, 2> kernel() { return {3, 3}; }
  static void transform_group(const float* wt, int64_t o, float* u, int64_t u_stride, int group) {
    f43::transform_group(wt, o, u, u_stride, group);
  }
  static void gradient_group(const float* du, int64_t du_stride, int64_t o, int group, float* dwt,
                             bool accumulate) {
    f43::gradient_group(du, du_stride, o, group, dwt, accumulate);
  }
  using Grid = f43::Grid;
  using InputRows = f43::InputRows;
  static void input_tiles(InputRows& rows, const Grid& g, int64_t t0, int64_t nt, int64_t begin,
                          int64_t end, float* v) {
    f43::input_tiles(rows, g, t0, nt, begin, end, v);
  }
  static void grad_output_tiles(const float* dy, const Grid& gy, int64_t t0, int64_t nt,
                                int64_t begin, int64_t end, float* m, float* stage) {
    f43::grad_output_tiles(dy, gy, t0, nt, begin, end, m, stage);
  }
  static void output_tiles(const float* m, const Grid& gy, int64_t t0, int64_t nt, int64_t begin,
                           int64_t end, float* y, float* stage) {
    f43::output_tiles(m, gy, t0, nt, begin, end, y, stage);
  }
  static int64_t stage_floats(const Grid& g) { return f43::stage_floats(g); }
  static at::Tensor transform_weights(const at::Tensor& w) { return f43::transform_weights(w); }
  static at::Tensor weights_gradient(const float* du, int64_t o, int64_t c) {
    return f43::weights_gradient(du, o, c);
  }
};

// --- Autograd ---------------------------------------------------------------------------------

Grid grid_of(const at::Tensor& x) {
  return Grid(x.size(0), x.size(2), x.size(3), x.size(1));
}

// conv(x, w), padding 1, for x dense channels-last and w (O, C, 3, 3) contiguous.
at::Tensor conv(const at::Tensor& x, const at::Tensor& w) {
  const Grid g = grid_of(x), gy = g.with_channels(w.size(0));
  at::Tensor y =
      at::empty({g.n, gy.c, g.h, g.w}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  winograd::forward_weights<Scheme>(x.data_ptr<float>(), g, w, gy, y.data_ptr<float>());
  return y;
}

class WinogradConv2dFunction : public torch::autograd::Function<WinogradConv2dFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& w_in) {
    const at::Tensor x = x_in.contiguous(at::MemoryFormat::ChannelsLast), w = w_in.contiguous();
    ctx->save_for_backward({x, w});
    return conv(x, w);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor x = saved[0], w = saved[1];
    const at::Tensor dy = grads.at(0).to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(1)) {
      const Grid g = grid_of(x);
      dw = winograd::weights<Scheme>(x.data_ptr<float>(), g, dy.data_ptr<float>(),
                                     g.with_channels(w.size(0)));
    }
    // dx = conv(dy, w flipped in space with its channel axes swapped), padding 1.
    if (ctx->needs_input_grad(0)) dx = conv(dy, w.flip({2, 3}).transpose(0, 1).contiguous());
    return {dx, dw};
  }
};

std::atomic<int64_t> forward_calls{0};

}  // namespace
}  // namespace f43

using f43::WinogradConv2dFunction;

bool winograd_conv2d_supported(const at::Tensor& x, const at::Tensor& w) {
  if (!x.defined() || !w.defined() || !x.device().is_cpu() || !w.device().is_cpu()) return false;
  if (x.dim() != 4 || w.dim() != 4 || x.size(1) != w.size(1)) return false;
  if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat) return false;
  if (w.size(2) != 3 || w.size(3) != 3) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  return x.size(1) % simd::kVec == 0 && w.size(0) % simd::kVec == 0;
}

int64_t winograd_conv2d_calls() {
  return f43::forward_calls.load();
}

at::Tensor winograd_conv2d_uncounted(const at::Tensor& x, const at::Tensor& w) {
  if (!winograd_conv2d_supported(x, w))
    throw core::Error(fmt::format(
        "Winograd conv2d: unsupported arguments (input {} {} on {}, weight {} {}); it takes "
        "float32 CPU tensors, the input channels-last, a 3x3 kernel and channel counts that are "
        "multiples of {}",
        fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()), x.device().str(),
        fmt::join(w.sizes(), "x"), c10::toString(w.scalar_type()), simd::kVec));
  return WinogradConv2dFunction::apply(x, w);
}

at::Tensor winograd_conv2d(const at::Tensor& x, const at::Tensor& w) {
  at::Tensor y = winograd_conv2d_uncounted(x, w);
  ++f43::forward_calls;
  return y;
}

const char* to_string(Conv3x3Kernel k) {
  switch (k) {
    case Conv3x3Kernel::DnnlWinograd:
      return "winograd";
    case Conv3x3Kernel::NativeWinograd:
      return "native_winograd";
    case Conv3x3Kernel::LibTorch:
      break;
  }
  return "libtorch";
}

Conv3x3Kernel choose_conv3x3(const at::Tensor& x_in, const at::Tensor& w_in) {
  const std::array<int64_t, 1> one{1};
  const bool dnnl = dnnl_conv2d_supported(x_in, w_in, one, one, DnnlAlgorithm::Winograd);
  const bool native = winograd_conv2d_supported(x_in, w_in);
  // The key is the start of the probe's system.json line.
  const std::string key =
      fmt::format("conv x {} {} {} w {} s1x1 p1x1", fmt::join(x_in.sizes(), "x"),
                  x_in.suggest_memory_format() == at::MemoryFormat::ChannelsLast ? "nhwc" : "nchw",
                  c10::toString(x_in.scalar_type()), fmt::join(w_in.sizes(), "x"));
  const std::string verdict = probe_verdicts().choose(key, [&] {
    ProbeResult result{to_string(Conv3x3Kernel::LibTorch), {}};
    if (!dnnl && !native) return result;  // nothing to measure
    // Forward and backward of each, also when first asked in validation (probe_leaf).
    const c10::InferenceMode normal(false);
    const c10::AutoGradMode grad_on(true);
    const at::Tensor x = probe_leaf(x_in), w = probe_leaf(w_in);
    const auto step_ms = [&](auto conv) {
      return core::best_time_ms([&] {
        const at::Tensor y = conv();
        torch::autograd::grad({y}, {x, w}, {y.detach()});
      });
    };
    if (dnnl)
      result.timings.push_back({to_string(Conv3x3Kernel::DnnlWinograd), step_ms([&] {
                                  return dnnl_conv2d(x, w, one, one, DnnlAlgorithm::Winograd);
                                })});
    if (native)
      result.timings.push_back({to_string(Conv3x3Kernel::NativeWinograd),
                                step_ms([&] { return winograd_conv2d_uncounted(x, w); })});
    const double libtorch_ms = step_ms([&] { return at::conv2d(x, w, {}, 1, 1); });
    double best = kWinogradMargin * libtorch_ms;
    for (const ProbeTiming& t : result.timings)
      if (t.ms < best) {
        best = t.ms;
        result.verdict = t.kernel;
      }
    result.timings.push_back({to_string(Conv3x3Kernel::LibTorch), libtorch_ms});
    return result;
  });
  // A verdict restored from a checkpoint written on another CPU may name a kernel this one lacks.
  if (verdict == to_string(Conv3x3Kernel::DnnlWinograd) && dnnl) return Conv3x3Kernel::DnnlWinograd;
  if (verdict == to_string(Conv3x3Kernel::NativeWinograd) && native)
    return Conv3x3Kernel::NativeWinograd;
  return Conv3x3Kernel::LibTorch;
}

}  // namespace scaffold::kernels
