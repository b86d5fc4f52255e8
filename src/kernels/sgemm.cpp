// The blocked, packed float32 product declared in sgemm.hpp. The loop nest is the usual one for
// a register-tiled product: columns of C in blocks of kNc (op(B)'s block, packed, stays in the
// last-level cache), the reduction in blocks of kc (a packed panel of kc x nr floats stays in L1
// while the tiles of a row block stream past it), rows in blocks of kMc (op(A)'s packed block
// stays in L2); in the middle, tiles of 6 rows by one panel of C held in registers for the
// panel's kc multiply-adds (micro8 below with AVX, winograd::micro's 6 x 4 vectors with AVX-512).
// Each step here was measured on a Zen 3 (docs/performance.md, "GPT: our own sgemm").
#include "kernels/sgemm.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_gemm.hpp"

namespace scaffold::kernels {
namespace {

using simd::kVec;
using simd::load8;
using simd::store8;
using simd::v8;

constexpr int64_t kMr = 6;     // rows of a register tile (both tilings of winograd_gemm.hpp)
constexpr int64_t kMc = 144;   // rows of op(A) packed at a time: 144 x kc floats in L2
constexpr int64_t kNc = 4096;  // columns of op(B) packed at a time: kc x 4096 floats in L3
// op(A) up to this many floats (32 MiB) is packed whole and shared by the threads where C has
// no more rows than columns and op(B) is transposed (columns_on_demand).
constexpr int64_t kSharedA = int64_t{8} << 20;

// A panel's width and the reduction block: 16 floats (two AVX registers) by 256 on AVX2, whose
// panel is 16 KiB of L1; 64 floats (four AVX-512 registers) by 128 on AVX-512, 32 KiB.
struct Blocking {
  int64_t nr, kc;
};
Blocking blocking() {
  if (simd::wide_registers()) return {int64_t{4} * kVec, 128};
  return {kVec, 256};
}

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// op(A)'s rows [i0, i0 + mc) by columns [p0, p0 + kc) into blocks of kMr rows, each kc x kMr
// (a column of the block's rows together: the tile's broadcasts read it in order); the rows of
// the last block past mc are zero.
SCAFFOLD_SIMD_CLONES void pack_a(bool trans, const float* a, int64_t lda, int64_t i0, int64_t mc,
                                 int64_t p0, int64_t kc, float* out) {
  for (int64_t ib = 0; ib < mc; ib += kMr) {
    const int64_t rows = std::min(kMr, mc - ib);
    float* dst = out + ib * kc;
    if (trans) {  // op(A)(i, p) = a[p lda + i]: a block's column is contiguous in a
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a + (p0 + p) * lda + i0 + ib;
        for (int64_t r = 0; r < rows; ++r) dst[p * kMr + r] = src[r];
        for (int64_t r = rows; r < kMr; ++r) dst[p * kMr + r] = 0.f;
      }
      continue;
    }
    if (rows == kMr) {  // op(A)(i, p) = a[i lda + p]: six rows read side by side
      const float* src = a + (i0 + ib) * lda + p0;
      for (int64_t p = 0; p < kc; ++p)
#pragma GCC unroll 6
        for (int64_t r = 0; r < kMr; ++r) dst[p * kMr + r] = src[r * lda + p];
      continue;
    }
    std::fill(dst, dst + kc * kMr, 0.f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = a + (i0 + ib + r) * lda + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * kMr + r] = src[p];
    }
  }
}

// out[q * ldo + i] = in[i * ldi + q] for an 8 x 8 block: rows interleaved in pairs, then in
// pairs of pairs, then 128-bit halves put together.
SCAFFOLD_SIMD_INLINE void transpose8(const float* in, int64_t ldi, float* out, int64_t ldo) {
  v8 r[8], t[8], s[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = load8(in + i * ldi).v;
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    s[h] = __builtin_shufflevector(t[h], t[h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    s[h + 1] = __builtin_shufflevector(t[h], t[h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    s[h + 2] = __builtin_shufflevector(t[h + 1], t[h + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    s[h + 3] = __builtin_shufflevector(t[h + 1], t[h + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    store8(out + q * ldo, __builtin_shufflevector(s[q], s[q + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    store8(out + (q + 4) * ldo,
           __builtin_shufflevector(s[q], s[q + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// op(B)'s rows [p0, p0 + kc) by columns [j0, j0 + nc) into panels of nr columns (the last one
// rounded up to a multiple of kVec, its columns past nc zero), each kc x width, row by row.
SCAFFOLD_SIMD_CLONES void pack_b(bool trans, const float* b, int64_t ldb, int64_t p0, int64_t kc,
                                 int64_t j0, int64_t nc, int64_t nr, float* out) {
  if (!trans) {  // op(B)(p, j) = b[p ldb + j]: rows of b read whole (a row of every panel)
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b + (p0 + p) * ldb + j0;
      for (int64_t jp = 0; jp < nc; jp += nr) {
        const int64_t cols = std::min(nr, nc - jp);
        const int64_t width = round_up(cols, kVec);
        float* row = out + jp * kc + p * width;
        int64_t c = 0;
        for (; c + kVec <= cols; c += kVec) {
          const simd::v16 v = simd::loadv(src + jp + c).v;  // a copy: see simd.hpp's VecAt
          simd::storev(row + c, v);
        }
        for (; c < cols; ++c) row[c] = src[jp + c];
        for (; c < width; ++c) row[c] = 0.f;
      }
    }
    return;
  }
  for (int64_t jp = 0; jp < nc; jp += nr) {
    const int64_t cols = std::min(nr, nc - jp);
    const int64_t width = round_up(cols, kVec);
    float* dst = out + jp * kc;
    // op(B)(p, j) = b[j ldb + p]: the panel's columns are rows of b, transposed 8 x 8 at a time.
    for (int64_t cb = 0; cb < width; cb += 8) {
      const int64_t n_valid = std::clamp<int64_t>(cols - cb, 0, 8);
      const float* src = b + (j0 + jp + cb) * ldb + p0;
      int64_t p = 0;
      if (n_valid == 8)
        for (; p + 8 <= kc; p += 8) transpose8(src + p, ldb, dst + p * width + cb, width);
      for (; p < kc; ++p) {
        float* row = dst + p * width + cb;
        for (int64_t c = 0; c < n_valid; ++c) row[c] = src[c * ldb + p];
        for (int64_t c = n_valid; c < 8; ++c) row[c] = 0.f;
      }
    }
  }
}

// The AVX tile: R rows of C by 16 floats in 2 R 256-bit registers.
template <int R>
SCAFFOLD_SIMD_INLINE void micro8(const float* ap, const float* bp, int64_t kc, float* c,
                                 int64_t ldc, bool accumulate) {
  // The accumulators start at zero and C is added at the end, its lines fetched meanwhile: a
  // tile's 6 rows are 6 cache misses whose wait would otherwise come first.
  v8 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    acc0[i] = v8{};
    acc1[i] = v8{};
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + 15, 1);
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const v8 b0 = load8(bp + k * 16).v;
    const v8 b1 = load8(bp + k * 16 + 8).v;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const float s = ap[k * kMr + i];
      acc0[i] += b0 * s;
      acc1[i] += b1 * s;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    if (accumulate) {
      acc0[i] += load8(c + i * ldc).v;
      acc1[i] += load8(c + i * ldc + 8).v;
    }
    store8(c + i * ldc, acc0[i]);
    store8(c + i * ldc + 8, acc1[i]);
  }
}

// One register tile: `rows` (<= kMr) rows of C by NV vectors, from packed operands.
template <int NV>
SCAFFOLD_SIMD_INLINE void tile(int64_t rows, const float* ap, const float* bp, int64_t kc, float* c,
                               int64_t ldc, bool accumulate) {
  constexpr int64_t kWidth = int64_t{NV} * kVec;
  switch (rows) {
#define SCAFFOLD_SGEMM_ROWS(r)                                                \
  case r:                                                                     \
    if constexpr (NV == 1)                                                    \
      micro8<r>(ap, bp, kc, c, ldc, accumulate);                              \
    else                                                                      \
      winograd::micro<r, NV>(ap, 1, kMr, bp, kWidth, c, ldc, kc, accumulate); \
    break;
    SCAFFOLD_SGEMM_ROWS(6)
    SCAFFOLD_SGEMM_ROWS(5)
    SCAFFOLD_SGEMM_ROWS(4)
    SCAFFOLD_SGEMM_ROWS(3)
    SCAFFOLD_SGEMM_ROWS(2)
    SCAFFOLD_SGEMM_ROWS(1)
#undef SCAFFOLD_SGEMM_ROWS
    default:
      break;
  }
}

SCAFFOLD_SIMD_INLINE void tile_any(int64_t nv, int64_t rows, const float* ap, const float* bp,
                                   int64_t kc, float* c, int64_t ldc, bool accumulate) {
  switch (nv) {
    case 4:
      tile<4>(rows, ap, bp, kc, c, ldc, accumulate);
      break;
    case 3:
      tile<3>(rows, ap, bp, kc, c, ldc, accumulate);
      break;
    case 2:
      tile<2>(rows, ap, bp, kc, c, ldc, accumulate);
      break;
    default:
      tile<1>(rows, ap, bp, kc, c, ldc, accumulate);
      break;
  }
}

// Lines [first, last) of a block of op(B)'s source: `outer` runs `stride` floats apart, each
// `inner` cache lines long. sgemm() has macro() fetch the next block's lines while it computes the
// current one, spread over its tiles: op(B) is a weight read from memory once per product, and
// packed in a burst its reads would wait on the memory's latency (measured: 12-19 % of a
// few-token product's time on a Zen 3).
struct BlockLines {
  const float* base = nullptr;
  int64_t outer = 0, stride = 0, inner = 0, first = 0, last = 0;

  // Share `part` of `parts` of the block's lines: what one of `parts` macro() calls fetches.
  BlockLines share(int64_t part, int64_t parts) const {
    BlockLines s = *this;
    s.first = part * outer * inner / parts;
    s.last = (part + 1) * outer * inner / parts;
    return s;
  }
};

// The whole block (no lines yet: callers share() it out).
BlockLines block_lines(bool trans, const float* b, int64_t ldb, int64_t p0, int64_t kc, int64_t j0,
                       int64_t nc) {
  if (trans) return {b + j0 * ldb + p0, nc, ldb, (kc + kVec - 1) / kVec};
  return {b + p0 * ldb + j0, kc, ldb, (nc + kVec - 1) / kVec};
}

// C's block (mc x nc, at c) from a packed block of op(A) (pack_a) and of op(B) (pack_b): each
// panel of op(B) against every row tile. A panel whose width is not a multiple of kVec is
// computed in a full-width tile on the stack and its valid columns copied out.
SCAFFOLD_SIMD_CLONES void macro(const float* ap, const float* bp, int64_t mc, int64_t nc,
                                int64_t kc, int64_t nr, float* c, int64_t ldc, bool accumulate,
                                const BlockLines& next) {
  const int64_t tiles = (mc + kMr - 1) / kMr * ((nc + nr - 1) / nr);
  int64_t fetched = next.first, tile = 0;
  for (int64_t jp = 0; jp < nc; jp += nr) {
    const int64_t cols = std::min(nr, nc - jp);
    const int64_t width = round_up(cols, kVec);
    const float* panel = bp + jp * kc;
    for (int64_t ib = 0; ib < mc; ib += kMr) {
      const int64_t rows = std::min(kMr, mc - ib);
      float* ct = c + ib * ldc + jp;
      // This tile's share of the next block's lines.
      ++tile;
      for (const int64_t until = next.first + tile * (next.last - next.first) / tiles;
           fetched < until; ++fetched)
        __builtin_prefetch(
            next.base + fetched / next.inner * next.stride + fetched % next.inner * kVec, 0, 0);
      if (cols == width) {
        tile_any(width / kVec, rows, ap + ib * kc, panel, kc, ct, ldc, accumulate);
        continue;
      }
      float part[kMr * 4 * kVec] = {};
      for (int64_t r = 0; r < rows && accumulate; ++r)
        std::memcpy(part + r * width, ct + r * ldc, static_cast<std::size_t>(cols) * sizeof(float));
      tile_any(width / kVec, rows, ap + ib * kc, panel, kc, part, width, true);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(ct + r * ldc, part + r * width, static_cast<std::size_t>(cols) * sizeof(float));
    }
  }
}

// The packing buffers of the calling thread, kept between calls (LibTorch's threads persist).
float* buffer(std::vector<float>& v, int64_t floats) {
  if (static_cast<int64_t>(v.size()) < floats) v.resize(static_cast<std::size_t>(floats));
  return v.data();
}

// C's columns handed out in chunks to whichever thread is free, op(A) packed whole beforehand and
// shared: the path of few-row products against a transposed op(B) (a GPT layer's forward: its
// tokens against the weight). A static split measured one thread 10-20 % behind the other on the
// same work (2 cores of a VM) and the product waiting for it; with chunks the forward products at
// 256 tokens went from 0.9-1.1 to 0.85-0.95 of OpenBLAS's time on a Zen 3. Not for an op(B) read
// row by row (an input gradient's weight): its chunks' rows are short runs of memory, and that
// product measured 10-25 % slower in chunks than split once.
void columns_on_demand(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       bool accumulate, const Blocking& bk) {
  const int64_t rows = round_up(m, kMr), k_blocks = (k + bk.kc - 1) / bk.kc;
  const int64_t row_blocks = (m + kMc - 1) / kMc;
  thread_local std::vector<float> shared_a;  // the calling thread's, reused between calls
  float* packed_a = buffer(shared_a, rows * k);
  // Reduction block q of op(A), rows [ic, ic + mc): at q rows kc, row block ic / kMr at ic kc.
  const auto a_block = [&](int64_t q, int64_t ic) {
    return packed_a + q * rows * bk.kc + ic * std::min(bk.kc, k - q * bk.kc);
  };
  parallel_for(0, k_blocks * row_blocks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t q = u / row_blocks, ic = u % row_blocks * kMc;
      pack_a(trans_a, a, lda, ic, std::min(kMc, m - ic), q * bk.kc, std::min(bk.kc, k - q * bk.kc),
             a_block(q, ic));
    }
  });
  const int64_t threads = std::max(1, at::get_num_threads());
  // Chunks of whole panels, about 2 a thread, at most 512 columns (a packed block of 512 KiB).
  const int64_t width = std::clamp(round_up((n + 2 * threads - 1) / (2 * threads), bk.nr), bk.nr,
                                   std::max<int64_t>(bk.nr, 512 / bk.nr * bk.nr));
  const int64_t chunks = (n + width - 1) / width;
  std::atomic<int64_t> next_chunk{0};
  parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    thread_local std::vector<float> b_buffer;
    float* bp = buffer(b_buffer, bk.kc * width);
    for (int64_t chunk = next_chunk++; chunk < chunks; chunk = next_chunk++) {
      const int64_t jc = chunk * width, nc = std::min(width, n - jc);
      for (int64_t q = 0; q < k_blocks; ++q) {
        const int64_t pc = q * bk.kc, kc = std::min(bk.kc, k - pc);
        pack_b(trans_b, b, ldb, pc, kc, jc, nc, bk.nr, bp);
        BlockLines next;  // this chunk's next block of op(B), fetched a share per row block
        if (q + 1 < k_blocks)
          next = block_lines(trans_b, b, ldb, pc + kc, std::min(bk.kc, k - pc - kc), jc, nc);
        for (int64_t ic = 0, block = 0; ic < m; ic += kMc, ++block)
          macro(a_block(q, ic), bp, std::min(kMc, m - ic), nc, kc, bk.nr, c + ic * ldc + jc, ldc,
                accumulate || q > 0, next.share(block, row_blocks));
      }
    }
  });
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  const Blocking bk = blocking();
  if (trans_b && m <= n && round_up(m, kMr) * k <= kSharedA) {
    columns_on_demand(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate, bk);
    return;
  }
  // Each thread packs the whole of the operand it does not split: split the larger side of C, so
  // that the operand packed by every thread is the smaller one.
  const bool split_rows = m > n;
  const int64_t units = split_rows ? (m + kMr - 1) / kMr : (n + bk.nr - 1) / bk.nr;
  parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
    const int64_t r0 = split_rows ? u0 * kMr : 0;
    const int64_t r1 = split_rows ? std::min(m, u1 * kMr) : m;
    const int64_t c0 = split_rows ? 0 : u0 * bk.nr;
    const int64_t c1 = split_rows ? n : std::min(n, u1 * bk.nr);
    thread_local std::vector<float> a_buffer, b_buffer;
    float* ap = buffer(a_buffer, kMc * bk.kc);
    float* bp = buffer(b_buffer, bk.kc * kNc);
    const int64_t row_blocks = (r1 - r0 + kMc - 1) / kMc;
    for (int64_t jc = c0; jc < c1; jc += kNc) {
      const int64_t nc = std::min(kNc, c1 - jc);
      for (int64_t pc = 0; pc < k; pc += bk.kc) {
        const int64_t kc = std::min(bk.kc, k - pc);
        pack_b(trans_b, b, ldb, pc, kc, jc, nc, bk.nr, bp);
        // The block of op(B) packed next, fetched a share per row block.
        BlockLines next;
        if (pc + kc < k)
          next = block_lines(trans_b, b, ldb, pc + kc, std::min(bk.kc, k - pc - kc), jc, nc);
        else if (jc + nc < c1)
          next = block_lines(trans_b, b, ldb, 0, std::min(bk.kc, k), jc + nc,
                             std::min(kNc, c1 - jc - nc));
        for (int64_t ic = r0, block = 0; ic < r1; ic += kMc, ++block) {
          const int64_t mc = std::min(kMc, r1 - ic);
          pack_a(trans_a, a, lda, ic, mc, pc, kc, ap);
          macro(ap, bp, mc, nc, kc, bk.nr, c + ic * ldc + jc, ldc, accumulate || pc > 0,
                next.share(block, row_blocks));
        }
      }
    }
  });
}

}  // namespace scaffold::kernels
