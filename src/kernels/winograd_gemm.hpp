// The products of the Winograd convolutions (winograd_conv.hpp, winograd_conv2d.hpp): after the
// transforms each transformed point is an independent matrix product, small enough (a block of
// tiles by the channels) that a register-tiled kernel on 16-float vectors beats a BLAS call per
// point. Always inline: the target_clones point products (winograd_schedule.cpp) compile it for
// each ISA (simd.hpp).
#pragma once

#include <cstdint>

#include "kernels/simd.hpp"

namespace scaffold::kernels::winograd {

using simd::kVec;
using simd::loadv;
using simd::storev;
using simd::v16;

// C[i][j] (R rows, NV vectors of columns) (+)= sum_k A(i, k) B[k][j], A(i, k) = a[i*ars + k*aks].
template <int R, int NV>
SCAFFOLD_SIMD_INLINE void micro(const float* a, int64_t ars, int64_t aks, const float* b,
                                int64_t ldb, float* c, int64_t ldc, int64_t k_len,
                                bool accumulate) {
  v16 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = v16{};
      if (accumulate) acc[i][v] = loadv(c + i * ldc + int64_t{v} * kVec).v;
    }
  for (int64_t k = 0; k < k_len; ++k) {
    v16 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = loadv(b + k * ldb + int64_t{v} * kVec).v;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const float s = a[i * ars + k * aks];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] += bv[v] * s;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) storev(c + i * ldc + int64_t{v} * kVec, acc[i][v]);
}

template <int NV, int kRows>
SCAFFOLD_SIMD_INLINE void gemm_columns(const float* a, int64_t ars, int64_t aks, const float* b,
                                       int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t k_len,
                                       bool accumulate) {
  int64_t i = 0;
  for (; i + kRows <= m; i += kRows)
    micro<kRows, NV>(a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc, k_len, accumulate);
  switch (m - i) {
#define SCAFFOLD_WG_TAIL(r)                                                           \
  case r:                                                                             \
    micro<r, NV>(a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc, k_len, accumulate); \
    break;
    SCAFFOLD_WG_TAIL(7)
    SCAFFOLD_WG_TAIL(6)
    SCAFFOLD_WG_TAIL(5)
    SCAFFOLD_WG_TAIL(4)
    SCAFFOLD_WG_TAIL(3)
    SCAFFOLD_WG_TAIL(2)
    SCAFFOLD_WG_TAIL(1)
#undef SCAFFOLD_WG_TAIL
    default:
      break;
  }
}

// C (m x n) (+)= A (m x k) B (k x n), n a multiple of kVec, B and C row-major. `wide`: tiles for
// 32 vector registers (AVX-512: 6 x 4 vectors of accumulators); otherwise for 16 registers of
// half a v16 each (AVX2: 6 x 1 vectors, i.e. 12 registers, the rest for B and the broadcast).
SCAFFOLD_SIMD_INLINE void gemm(const float* a, int64_t ars, int64_t aks, const float* b,
                               int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                               int64_t k_len, bool accumulate, bool wide) {
  int64_t j = 0;
  if (wide) {
    for (; j + int64_t{4} * kVec <= n; j += int64_t{4} * kVec)
      gemm_columns<4, 6>(a, ars, aks, b + j, ldb, c + j, ldc, m, k_len, accumulate);
    for (; j + int64_t{2} * kVec <= n; j += int64_t{2} * kVec)
      gemm_columns<2, 6>(a, ars, aks, b + j, ldb, c + j, ldc, m, k_len, accumulate);
    for (; j < n; j += kVec)
      gemm_columns<1, 8>(a, ars, aks, b + j, ldb, c + j, ldc, m, k_len, accumulate);
    return;
  }
  for (; j < n; j += kVec)
    gemm_columns<1, 6>(a, ars, aks, b + j, ldb, c + j, ldc, m, k_len, accumulate);
}

}  // namespace scaffold::kernels::winograd
