// Winograd F(2x2x2, 3x3x3) convolution of winograd_conv.hpp. The tensors stay in their own layout
// (NCDHW or channels-last); each thread stages the rows its tiles read channels-last, so every
// transform runs on vectors of 16 contiguous channels, and the products are row-major panels. Per
// block of tiles (sized so its transformed input and output stay in the core's L2) a thread
// transforms the input tiles, runs the 64 products, and transforms the results into the output;
// blocks run in parallel (the schedules of winograd_schedule.hpp, shared with the 2-D kernel).
// Matrices of F(2,3) (Lavin and Gray, 2016):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   (input, 4 -> 4)
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] (weights, 3 -> 4)
//   A^T = [1 1 1 0; 0 1 -1 -1]                       (output, 4 -> 2)
// applied along D, H and W in turn.
#include "kernels/winograd_conv.hpp"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/parallel.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_schedule.hpp"
#include "nn/memory_format.hpp"

namespace scaffold::kernels {
// A namespace of its own: the kernels build as one unity source, and the 2-D kernel's helpers
// have the same names.
namespace f23 {
namespace {

using simd::kVec;
using simd::loadv;
using simd::storev;
using simd::v16;

constexpr int kPoints = 64;  // 4 x 4 x 4 transformed points per tile

// --- Transforms (per vector of 16 channels, the tile's values in registers) -------------------

// Row r of B^T (4 -> 4), of A^T (4 -> 2) and of A (2 -> 4), r a compile-time constant.
template <int R>
SCAFFOLD_SIMD_INLINE void bt_row(const v16& x0, const v16& x1, const v16& x2, const v16& x3,
                                 v16& r) {
  if constexpr (R == 0) r = x0 - x2;
  if constexpr (R == 1) r = x1 + x2;
  if constexpr (R == 2) r = x2 - x1;
  if constexpr (R == 3) r = x1 - x3;
}
SCAFFOLD_SIMD_INLINE void bt4(v16& x0, v16& x1, v16& x2, v16& x3) {
  const v16 d0 = x0 - x2, d1 = x1 + x2, d2 = x2 - x1, d3 = x1 - x3;
  x0 = d0;
  x1 = d1;
  x2 = d2;
  x3 = d3;
}
template <int R>
SCAFFOLD_SIMD_INLINE void at_row(const v16& x0, const v16& x1, const v16& x2, const v16& x3,
                                 v16& r) {
  if constexpr (R == 0) r = x0 + x1 + x2;
  if constexpr (R == 1) r = x1 - x2 - x3;
}
template <int R>
SCAFFOLD_SIMD_INLINE void a_row(const v16& x0, const v16& x1, v16& r) {
  if constexpr (R == 0) r = x0;
  if constexpr (R == 1) r = x0 + x1;
  if constexpr (R == 2) r = x0 - x1;
  if constexpr (R == 3) r = -x1;
}

// An activation (N, C, D, H, W), contiguous (NCDHW) or channels-last (NDHWC) in memory, and its
// grid of 2x2x2 tiles, numbered ((n * td + tz) * th + ty) * tw + tx.
struct Grid {
  int64_t n, d, h, w, c;
  bool cl;
  int64_t td, th, tw;
  Grid(int64_t n_, int64_t d_, int64_t h_, int64_t w_, int64_t c_, bool cl_)
      : n(n_),
        d(d_),
        h(h_),
        w(w_),
        c(c_),
        cl(cl_),
        td((d_ + 1) / 2),
        th((h_ + 1) / 2),
        tw((w_ + 1) / 2) {}
  int64_t tiles() const { return n * td * th * tw; }
  Grid with_channels(int64_t channels) const { return Grid(n, d, h, w, channels, cl); }
};

// Tiles a .. b of tile row (n, tz, ty), the first of them tile number t.
struct TileRow {
  int64_t n, tz, ty, a, b, t;
};

// The run of tiles from `begin` (before `end`) that lies in begin's tile row. The callers loop
// over these runs themselves: a lambda would be compiled for the base ISA, outside the clones.
SCAFFOLD_SIMD_INLINE TileRow tile_row(const Grid& g, int64_t begin, int64_t end) {
  const int64_t a = begin % g.tw, row = begin / g.tw;
  const int64_t b = std::min(g.tw, a + (end - begin));
  return TileRow{row / (g.th * g.td), (row / g.th) % g.td, row % g.th, a, b, begin};
}

// r[i][j] = r[j][i] for 16 vectors of 16 floats: four butterfly stages, stage D exchanging the
// elements (i, j) and (i + D, j - D) where bit D is clear in i and set in j. The shuffles'
// indices are constants (__builtin_shufflevector, which GCC >= 12 and clang both have).
template <int D, int... J>
SCAFFOLD_SIMD_INLINE void butterfly(v16& a, v16& b, std::integer_sequence<int, J...>) {
  const v16 lo = __builtin_shufflevector(a, b, ((J & D) ? 16 + J - D : J)...);
  const v16 hi = __builtin_shufflevector(a, b, ((J & D) ? 16 + J : J + D)...);
  a = lo;
  b = hi;
}
template <int D>
SCAFFOLD_SIMD_INLINE void transpose_stage(v16 (&r)[16]) {
  constexpr auto lanes = std::make_integer_sequence<int, 16>{};
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    if (!(i & D)) butterfly<D>(r[i], r[i + D], lanes);
}
SCAFFOLD_SIMD_INLINE void transpose16(v16 (&r)[16]) {
  transpose_stage<8>(r);
  transpose_stage<4>(r);
  transpose_stage<2>(r);
  transpose_stage<1>(r);
}

// 16 vectors loaded at src + i * src_stride, transposed, stored at dst + i * dst_stride.
SCAFFOLD_SIMD_INLINE void transpose_block(const float* src, int64_t src_stride, float* dst,
                                          int64_t dst_stride) {
  v16 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = loadv(src + i * src_stride).v;
  transpose16(r);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) storev(dst + i * dst_stride, r[i]);
}

// Voxels w0 .. w1 of row (n, z, y) of activation x, channels-last at out + (w - w0) * g.c: a
// copy from channels-last memory, a transpose in 16 x 16 register blocks from NCDHW.
SCAFFOLD_SIMD_INLINE void load_row(const float* x, const Grid& g, int64_t n, int64_t z, int64_t y,
                                   int64_t w0, int64_t w1, float* out) {
  const int64_t c = g.c;
  if (w1 <= w0) return;
  if (g.cl) {
    std::memcpy(out, x + (((n * g.d + z) * g.h + y) * g.w + w0) * c, sizeof(float) * (w1 - w0) * c);
    return;
  }
  const int64_t plane = g.d * g.h * g.w;
  for (int64_t c0 = 0; c0 < c; c0 += kVec) {
    const float* s = x + (n * c + c0) * plane + (z * g.h + y) * g.w;
    int64_t w = w0;
    for (; w + kVec <= w1; w += kVec) transpose_block(s + w, plane, out + (w - w0) * c + c0, c);
    for (; w < w1; ++w)
      for (int i = 0; i < kVec; ++i) out[(w - w0) * c + c0 + i] = s[i * plane + w];
  }
}

// The inverse: voxels w0 .. w1 of row (n, z, y) of y written from channels-last `in`.
SCAFFOLD_SIMD_INLINE void store_row(const float* in, const Grid& g, int64_t n, int64_t z,
                                    int64_t yy, int64_t w0, int64_t w1, float* y) {
  const int64_t c = g.c;
  if (w1 <= w0) return;
  if (g.cl) {
    std::memcpy(y + (((n * g.d + z) * g.h + yy) * g.w + w0) * c, in, sizeof(float) * (w1 - w0) * c);
    return;
  }
  const int64_t plane = g.d * g.h * g.w;
  for (int64_t c0 = 0; c0 < c; c0 += kVec) {
    float* d = y + (n * c + c0) * plane + (z * g.h + yy) * g.w;
    int64_t w = w0;
    for (; w + kVec <= w1; w += kVec) transpose_block(in + (w - w0) * c + c0, c, d + w, plane);
    for (; w < w1; ++w)
      for (int i = 0; i < kVec; ++i) d[i * plane + w] = in[(w - w0) * c + c0 + i];
  }
}

// The input rows one thread's tiles read, channels-last with a zero voxel before and after:
// slot (z mod 4, y mod 4) holds row (n, z, y) over w = -1 .. 2 tw; a tile row's 16 rows have
// distinct slots, and the next tile row along H finds half of them staged. Rows outside the
// volume read a row of zeros. Nothing in the activation is read twice for one tile row.
class InputRows {
 public:
  InputRows(const float* x, const Grid& g)
      : x_(x), g_(g), width_((2 * g.tw + 2) * g.c), buf_(static_cast<std::size_t>(17 * width_)) {
    std::fill(tag_, tag_ + 16, int64_t{-1});
  }
  SCAFFOLD_SIMD_INLINE const float* row(int64_t n, int64_t z, int64_t y) {
    float* zero = buf_.data() + 16 * width_;  // zero-initialised, never written
    if (z < 0 || z >= g_.d || y < 0 || y >= g_.h) return zero;
    const int64_t slot = (z & 3) * 4 + (y & 3), key = (n * g_.d + z) * g_.h + y;
    float* r = buf_.data() + slot * width_;
    if (tag_[slot] != key) {
      tag_[slot] = key;
      std::memset(r, 0, sizeof(float) * g_.c);
      std::memset(r + (g_.w + 1) * g_.c, 0, sizeof(float) * (width_ - (g_.w + 1) * g_.c));
      load_row(x_, g_, n, z, y, 0, g_.w, r + g_.c);
    }
    return r;
  }

 private:
  const float* x_;
  Grid g_;
  int64_t width_;
  std::vector<float> buf_;
  int64_t tag_[16];
};

// Plane K (the W point) of a transformed input tile whose row (i, j) starts at rows[i * 4 + j]
// (c floats per voxel): B^T row K along W of each row, then B^T along H and D, stored to
// v + ((i*4+j)*4+K) * vs. Each plane reloads the two voxels per row it needs (from L1), so no
// intermediate spills to memory: the stores are V's alone.
template <int K>
SCAFFOLD_SIMD_INLINE void input_plane(const float* const (&rows)[16], int64_t off, int64_t c,
                                      float* v, int64_t vs) {
  v16 a[4][4];
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q) {
    const float* row = rows[q] + off;
    const v16 x0 = loadv(row).v, x1 = loadv(row + c).v, x2 = loadv(row + 2 * c).v,
              x3 = loadv(row + 3 * c).v;
    bt_row<K>(x0, x1, x2, x3, a[q / 4][q % 4]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) bt4(a[i][0], a[i][1], a[i][2], a[i][3]);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) bt4(a[0][j], a[1][j], a[2][j], a[3][j]);
  float* o = v + K * vs;
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q, o += 4 * vs) storev(o, a[q / 4][q % 4]);
}

// The 4x4x4 input tile whose row (i, j) starts at rows[i * 4 + j] + off (c channels per voxel),
// transformed to V: point p's c values at v + p * v_stride.
SCAFFOLD_SIMD_INLINE void input_tile(const float* const (&rows)[16], int64_t off, int64_t c,
                                     float* v, int64_t v_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    input_plane<0>(rows, off + cc, c, v + cc, v_stride);
    input_plane<1>(rows, off + cc, c, v + cc, v_stride);
    input_plane<2>(rows, off + cc, c, v + cc, v_stride);
    input_plane<3>(rows, off + cc, c, v + cc, v_stride);
  }
}

// Each of the other transforms runs in two stages: one a loop over the tile's 16 rows at runtime
// strides (few live addresses), the other fully unrolled on a stack copy at fixed offsets. Fully
// unrolled over runtime strides, the compiler keeps 64 addresses alive and spills them.

// The 64 products of one tile (point p at m + p * m_stride, c values) transformed by A^T along W,
// H and D to its 2x2x2 output voxels: voxel (i, j, k) at out + (i * 2 + j) * row_stride + k * c.
SCAFFOLD_SIMD_INLINE void output_tile(const float* m, int64_t m_stride, int64_t c, float* out,
                                      int64_t row_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    v16 r[16][2];  // [i*4+j][k]: each row of points transformed along W
    const float* q = m + cc;
#pragma GCC unroll 1
    for (int row = 0; row < 16; ++row, q += 4 * m_stride) {
      const v16 x0 = loadv(q).v, x1 = loadv(q + m_stride).v, x2 = loadv(q + 2 * m_stride).v,
                x3 = loadv(q + 3 * m_stride).v;
      at_row<0>(x0, x1, x2, x3, r[row][0]);
      at_row<1>(x0, x1, x2, x3, r[row][1]);
    }
    v16 s[4][2][2];  // [i][j][k] after H
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        const int i4 = i * 4;
        const v16 x0 = r[i4][k], x1 = r[i4 + 1][k], x2 = r[i4 + 2][k], x3 = r[i4 + 3][k];
        at_row<0>(x0, x1, x2, x3, s[i][0][k]);
        at_row<1>(x0, x1, x2, x3, s[i][1][k]);
      }
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j)
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        float* o = out + j * row_stride + k * c + cc;
        v16 t0, t1;
        at_row<0>(s[0][j][k], s[1][j][k], s[2][j][k], s[3][j][k], t0);
        at_row<1>(s[0][j][k], s[1][j][k], s[2][j][k], s[3][j][k], t1);
        storev(o, t0);
        storev(o + 2 * row_stride, t1);
      }
  }
}

// The output gradient of one tile, voxel (i, j, k) at in + (i * 2 + j) * row_stride + k * c, as
// the 64 points A dY A^T at dm + p * dm_stride.
SCAFFOLD_SIMD_INLINE void grad_output_tile(const float* in, int64_t row_stride, int64_t c,
                                           float* dm, int64_t dm_stride) {
  for (int64_t cc = 0; cc < c; cc += kVec) {
    v16 q[2][2][2];
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i)
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j)
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k)
          q[i][j][k] = loadv(in + (i * 2 + j) * row_stride + k * c + cc).v;
    // A along D, then H: e[i*4+j][k] for the tile's 16 rows, still 2 wide in W.
    v16 e[16][2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      v16 f[4][2];  // [i][j]
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        a_row<0>(q[0][j][k], q[1][j][k], f[0][j]);
        a_row<1>(q[0][j][k], q[1][j][k], f[1][j]);
        a_row<2>(q[0][j][k], q[1][j][k], f[2][j]);
        a_row<3>(q[0][j][k], q[1][j][k], f[3][j]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int i4 = i * 4;
        a_row<0>(f[i][0], f[i][1], e[i4][k]);
        a_row<1>(f[i][0], f[i][1], e[i4 + 1][k]);
        a_row<2>(f[i][0], f[i][1], e[i4 + 2][k]);
        a_row<3>(f[i][0], f[i][1], e[i4 + 3][k]);
      }
    }
    float* o = dm + cc;
#pragma GCC unroll 1
    for (int row = 0; row < 16; ++row, o += 4 * dm_stride) {
      v16 t[4];
      a_row<0>(e[row][0], e[row][1], t[0]);
      a_row<1>(e[row][0], e[row][1], t[1]);
      a_row<2>(e[row][0], e[row][1], t[2]);
      a_row<3>(e[row][0], e[row][1], t[3]);
      storev(o, t[0]);
      storev(o + dm_stride, t[1]);
      storev(o + 2 * dm_stride, t[2]);
      storev(o + 3 * dm_stride, t[3]);
    }
  }
}

// --- Weights ---------------------------------------------------------------------------------

// G along one axis (3 -> 4) and its transpose (4 -> 3), for floats or vectors of them.
template <typename T>
SCAFFOLD_SIMD_INLINE void g4(const T& s0, const T& s1, const T& s2, T* d) {
  d[0] = s0;
  d[1] = (s0 + s1 + s2) * 0.5f;
  d[2] = (s0 - s1 + s2) * 0.5f;
  d[3] = s2;
}
template <typename T>
SCAFFOLD_SIMD_INLINE void gt3(const T& u0, const T& u1, const T& u2, const T& u3, T* e) {
  e[0] = u0 + (u1 + u2) * 0.5f;
  e[1] = (u1 - u2) * 0.5f;
  e[2] = (u1 + u2) * 0.5f + u3;
}

// The 64 rows U[p][ci][.] of one input channel from its weights wt (27, O) ([tap][co]), 16
// output channels per vector; row p at u + p * u_stride.
SCAFFOLD_SIMD_CLONES void transform_channel(const float* wt, int64_t o, float* u,
                                            int64_t u_stride) {
  for (int64_t co = 0; co < o; co += kVec) {
    v16 a[3][3][4], b[3][4][4], r[4][4][4];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        const v16 w0 = loadv(wt + (i * 9 + j * 3) * o + co).v,
                  w1 = loadv(wt + (i * 9 + j * 3 + 1) * o + co).v,
                  w2 = loadv(wt + (i * 9 + j * 3 + 2) * o + co).v;
        g4(w0, w1, w2, a[i][j]);
      }
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) {
        v16 d[4];
        g4(a[i][0][k], a[i][1][k], a[i][2][k], d);
        for (int j = 0; j < 4; ++j) b[i][j][k] = d[j];
      }
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) {
        v16 d[4];
        g4(b[0][j][k], b[1][j][k], b[2][j][k], d);
        for (int i = 0; i < 4; ++i) r[i][j][k] = d[i];
      }
    for (int p = 0; p < kPoints; ++p) storev(u + p * u_stride + co, (&r[0][0][0])[p]);
  }
}

// The adjoint for one input channel: dwt (27, O) of ci from the 64 rows dU[p][ci][.] at
// du + p * du_stride.
SCAFFOLD_SIMD_CLONES void gradient_channel(const float* du, int64_t du_stride, int64_t o,
                                           float* dwt) {
  for (int64_t co = 0; co < o; co += kVec) {
    v16 r[4][4][4], b[3][4][4], a[3][3][4];
    for (int p = 0; p < kPoints; ++p) (&r[0][0][0])[p] = loadv(du + p * du_stride + co).v;
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) {
        v16 e[3];
        gt3(r[0][j][k], r[1][j][k], r[2][j][k], r[3][j][k], e);
        for (int i = 0; i < 3; ++i) b[i][j][k] = e[i];
      }
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) {
        v16 e[3];
        gt3(b[i][0][k], b[i][1][k], b[i][2][k], b[i][3][k], e);
        for (int j = 0; j < 3; ++j) a[i][j][k] = e[j];
      }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        v16 e[3];
        gt3(a[i][j][0], a[i][j][1], a[i][j][2], a[i][j][3], e);
        for (int k = 0; k < 3; ++k) storev(dwt + (i * 9 + j * 3 + k) * o + co, e[k]);
      }
  }
}

// U[p][ci][co] = (G w[co][ci] G^T)[p] for w (O, C, 3, 3, 3).
at::Tensor transform_weights(const at::Tensor& w) {
  return winograd::transform_weights<kPoints, 27>(w, &transform_channel);
}

// dw (O, C, 3, 3, 3) = G^T dU[.][ci][co] G for dU (64, C, O): the adjoint of
// transform_weights.
at::Tensor weights_gradient(const float* du, int64_t o, int64_t c) {
  return winograd::weights_gradient<27>(du, o, c, {3, 3, 3}, &gradient_channel);
}

// --- Passes (winograd_schedule.hpp) ---------------------------------------------------------

using winograd::point_stride;

// Tiles t0 + begin .. t0 + end of a chunk of `nt` tiles: point p of chunk tile t at
// v + p * point_stride(nt, channels) + t * channels.
SCAFFOLD_SIMD_CLONES void input_tiles(InputRows& rows, const Grid& g, int64_t t0, int64_t nt,
                                      int64_t begin, int64_t end, float* v) {
  const int64_t vs = point_stride(nt, g.c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(g, t, t0 + end);
    t += r.b - r.a;
    const float* src[16];
    for (int q = 0; q < 16; ++q) src[q] = rows.row(r.n, 2 * r.tz - 1 + q / 4, 2 * r.ty - 1 + q % 4);
    for (int64_t tx = r.a; tx < r.b; ++tx)
      input_tile(src, 2 * tx * g.c, g.c, v + (r.t + tx - r.a - t0) * g.c, vs);
  }
}

// `stage` holds 4 rows of 2 tw voxels (4 * 2 * gy.tw * gy.c floats): a tile row's output
// gradient, channels-last and zero past the edge.
SCAFFOLD_SIMD_CLONES void grad_output_tiles(const float* dy, const Grid& gy, int64_t t0, int64_t nt,
                                            int64_t begin, int64_t end, float* m, float* stage) {
  const int64_t c = gy.c, ms = point_stride(nt, c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(gy, t, t0 + end);
    t += r.b - r.a;
    const int64_t bw = 2 * (r.b - r.a), w0 = 2 * r.a, w1 = std::min(2 * r.b, gy.w);
    for (int q = 0; q < 4; ++q) {
      float* row = stage + q * bw * c;
      const int64_t z = 2 * r.tz + q / 2, y = 2 * r.ty + q % 2;
      const int64_t filled = (z < gy.d && y < gy.h) ? w1 - w0 : 0;
      load_row(dy, gy, r.n, z, y, w0, w0 + filled, row);
      std::memset(row + filled * c, 0, sizeof(float) * (bw - filled) * c);
    }
    for (int64_t tx = r.a; tx < r.b; ++tx)
      grad_output_tile(stage + 2 * (tx - r.a) * c, bw * c, c, m + (r.t + tx - r.a - t0) * c, ms);
  }
}

// `stage` as for grad_output_tiles: a tile row's output, written to y once the row is done.
SCAFFOLD_SIMD_CLONES void output_tiles(const float* m, const Grid& gy, int64_t t0, int64_t nt,
                                       int64_t begin, int64_t end, float* y, float* stage) {
  const int64_t c = gy.c, ms = point_stride(nt, c);
  for (int64_t t = t0 + begin; t < t0 + end;) {
    const TileRow r = tile_row(gy, t, t0 + end);
    t += r.b - r.a;
    const int64_t bw = 2 * (r.b - r.a);
    for (int64_t tx = r.a; tx < r.b; ++tx)
      output_tile(m + (r.t + tx - r.a - t0) * c, ms, c, stage + 2 * (tx - r.a) * c, bw * c);
    for (int q = 0; q < 4; ++q) {
      const int64_t z = 2 * r.tz + q / 2, yy = 2 * r.ty + q % 2;
      if (z < gy.d && yy < gy.h)
        store_row(stage + q * bw * c, gy, r.n, z, yy, 2 * r.a, std::min(2 * r.b, gy.w), y);
    }
  }
}

// Floats of one thread's output stage.
int64_t stage_floats(const Grid& g) {
  return int64_t{4} * 2 * g.tw * g.c;
}

// The 3-D kernel as winograd_schedule.hpp's schedules see it.
struct Scheme {
  static constexpr int kPoints = f23::kPoints;
  static constexpr int kGroups = 0;  // no groups schedule (winograd_schedule.hpp)
  using Grid = f23::Grid;
  using InputRows = f23::InputRows;
  static void input_tiles(InputRows& rows, const Grid& g, int64_t t0, int64_t nt, int64_t begin,
                          int64_t end, float* v) {
    f23::input_tiles(rows, g, t0, nt, begin, end, v);
  }
  static void grad_output_tiles(const float* dy, const Grid& gy, int64_t t0, int64_t nt,
                                int64_t begin, int64_t end, float* m, float* stage) {
    f23::grad_output_tiles(dy, gy, t0, nt, begin, end, m, stage);
  }
  static void output_tiles(const float* m, const Grid& gy, int64_t t0, int64_t nt, int64_t begin,
                           int64_t end, float* y, float* stage) {
    f23::output_tiles(m, gy, t0, nt, begin, end, y, stage);
  }
  static int64_t stage_floats(const Grid& g) { return f23::stage_floats(g); }
  static at::Tensor transform_weights(const at::Tensor& w) { return f23::transform_weights(w); }
  static at::Tensor weights_gradient(const float* du, int64_t o, int64_t c) {
    return f23::weights_gradient(du, o, c);
  }
};

// --- Autograd ---------------------------------------------------------------------------------

Grid grid_of(const at::Tensor& x, bool cl) {
  return Grid(x.size(0), x.size(2), x.size(3), x.size(4), x.size(1), cl);
}

// conv(x, w), padding 1, for x dense in the layout `cl` names and w (O, C, 3, 3, 3) contiguous;
// the result in the same layout. The transforms read and write that layout directly.
at::Tensor conv(const at::Tensor& x, const at::Tensor& w, bool cl) {
  const Grid g = grid_of(x, cl), gy = g.with_channels(w.size(0));
  at::Tensor y =
      at::empty({g.n, gy.c, g.d, g.h, g.w}, x.options().memory_format(nn::volume_format(cl)));
  winograd::forward_weights<Scheme>(x.data_ptr<float>(), g, w, gy, y.data_ptr<float>());
  return y;
}

class WinogradConv3dFunction : public torch::autograd::Function<WinogradConv3dFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& w_in) {
    const bool cl = nn::is_channels_last_3d(x_in);
    const at::Tensor x = x_in.contiguous(nn::volume_format(cl)), w = w_in.contiguous();
    ctx->save_for_backward({x, w});
    return conv(x, w, cl);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor x = saved[0], w = saved[1];
    const bool cl = nn::is_channels_last_3d(x);
    const at::Tensor dy = grads.at(0).to(at::kFloat).contiguous(nn::volume_format(cl));
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(1)) {
      const Grid g = grid_of(x, cl);
      dw = winograd::weights<Scheme>(x.data_ptr<float>(), g, dy.data_ptr<float>(),
                                     g.with_channels(w.size(0)));
    }
    // dx = conv(dy, w flipped in space with its channel axes swapped), padding 1.
    if (ctx->needs_input_grad(0)) dx = conv(dy, w.flip({2, 3, 4}).transpose(0, 1).contiguous(), cl);
    return {dx, dw};
  }
};

}  // namespace
}  // namespace f23

using f23::WinogradConv3dFunction;

bool winograd_conv3d_supported(const at::Tensor& x, const at::Tensor& w) {
  if (!x.defined() || !w.defined() || !x.device().is_cpu() || !w.device().is_cpu()) return false;
  if (x.dim() != 5 || w.dim() != 5 || x.size(1) != w.size(1)) return false;
  if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat) return false;
  if (w.size(2) != 3 || w.size(3) != 3 || w.size(4) != 3) return false;
  return x.size(1) % simd::kVec == 0 && w.size(0) % simd::kVec == 0;
}

std::atomic<int64_t> forward_calls{0};

int64_t winograd_conv3d_calls() {
  return forward_calls.load();
}

int64_t winograd_probe_samples(const at::Tensor& x) {
  const int64_t per_sample = ((x.size(2) + 1) / 2) * ((x.size(3) + 1) / 2) * ((x.size(4) + 1) / 2);
  return std::min(x.size(0), std::max<int64_t>(1, (kProbeTiles + per_sample - 1) / per_sample));
}

bool winograd_conv3d_pays(const at::Tensor& x_in, const at::Tensor& w_in) {
  if (!winograd_conv3d_supported(x_in, w_in)) return false;
  const int64_t samples = winograd_probe_samples(x_in);
  // The key is the start of the probe's system.json line.
  std::string key =
      fmt::format("conv3d x {} {} w {}", fmt::join(x_in.sizes(), "x"),
                  nn::is_channels_last_3d(x_in) ? "ndhwc" : "ncdhw", fmt::join(w_in.sizes(), "x"));
  if (samples < x_in.size(0))
    key += fmt::format(", timed on {} of {} samples", samples, x_in.size(0));
  return probe_verdicts().choose(key, [&] {
    // Forward and backward of each, also when first asked in validation (no grad, or inference
    // mode, whose tensors take no gradient: hence the copies).
    const c10::InferenceMode normal(false);
    const c10::AutoGradMode grad_on(true);
    const at::Tensor x = x_in.narrow(0, 0, samples).detach().clone().requires_grad_(true);
    const at::Tensor w = w_in.detach().clone().requires_grad_(true);
    const bool onednn = dnnl_conv3d_supported(x, w);
    const auto forward_backward = [&](auto conv) {
      return [&, conv] {
        const at::Tensor y = conv();
        torch::autograd::grad({y}, {x, w}, {y.detach()});
      };
    };
    // Not winograd_conv3d(): the probe's calls are not the model's (winograd_conv3d_calls).
    const double winograd_ms =
        core::best_time_ms(forward_backward([&] { return WinogradConv3dFunction::apply(x, w); }));
    const double direct_ms = core::best_time_ms(forward_backward(
        [&] { return onednn ? dnnl_conv3d(x, w, /*padding=*/1) : at::conv3d(x, w, {}, 1, 1); }));
    const std::string direct = onednn ? "onednn" : "libtorch";
    return ProbeResult{winograd_ms < kWinogradMargin * direct_ms ? "winograd" : direct,
                       {{"winograd", winograd_ms}, {direct, direct_ms}}};
  }) == "winograd";
}

at::Tensor winograd_conv3d(const at::Tensor& x, const at::Tensor& w) {
  if (!winograd_conv3d_supported(x, w))
    throw core::Error(fmt::format(
        "Winograd conv3d: unsupported arguments (input {} {} on {}, weight {} {}); it takes "
        "float32 CPU tensors, a 3x3x3 kernel and channel counts that are multiples of {}",
        fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()), x.device().str(),
        fmt::join(w.sizes(), "x"), c10::toString(w.scalar_type()), simd::kVec));
  ++forward_calls;
  return WinogradConv3dFunction::apply(x, w);
}

}  // namespace scaffold::kernels
