// The schedules the Winograd convolutions share (the U-Net's 3-D F(2,3), winograd_conv.hpp;
// ResNet's 2-D F(4,3), winograd_conv2d.hpp): after the transforms a layer is P independent
// matrix products, one per transformed point, and the two differ only in P and in their
// transforms. Two schedules:
// - blocks (the default): per block of tiles, sized so its transformed input and products stay
//   in a core's L2 (~1 MiB), a thread transforms the input tiles, runs the P products and
//   transforms the results into the output; blocks run in parallel.
// - chunks, for layers whose transformed weights (P C O floats) are too big to stream through L2
//   once per small block (the wide ones): a large chunk of tiles is transformed first, then each
//   point's product runs over the whole chunk with that point's weights in cache (in parallel
//   over points), then the chunk is transformed back. Its scratch is bounded by
//   winograd_chunk_bytes() (16 MiB; tests lower it).
// Measured on the U-Net's layers (docs/performance.md): blocks of fewer than 18 tiles (three of
// the product kernel's row groups) lose to the chunks.
//
// A convolution plugs in as a Scheme type with: kPoints; kGroups (0: no groups schedule, below);
// Grid (tiles(), and c, the channels); InputRows, constructible from (const float* x, const
// Grid&); and the clones
//   input_tiles(InputRows&, g, t0, nt, begin, end, v)       tiles t0+begin .. t0+end -> V
//   grad_output_tiles(dy, gy, t0, nt, begin, end, m, stage) output gradient tiles -> A dY A^T
//   output_tiles(m, gy, t0, nt, begin, end, y, stage)       products -> output
//   stage_floats(gy)                                        one thread's output stage
//   transform_weights(w)                                    w -> U (P, C, O)
//   weights_gradient(du, o, c)                              dU (P, C, O) -> dw
// where point p of chunk tile t lies at p * point_stride(nt, channels) + t * channels.
//
// A third schedule, groups, for a wide layer whose tiles fit one chunk (ResNet's 7^2 and 14^2
// layers): the P transformed weights (P C O floats: 38 MB at 512 channels, allocated while every
// activation is live) are made, used and dropped a group of points at a time, and the weight
// gradient is summed into the taps group by group, so only kPoints / kGroups points of either
// are held. A scheme opts in with kGroups > 0, kTaps, and the clones
//   transform_group(wt, o, u, u_stride, group)   one input channel's (Taps, O) weights -> the
//                                                group's rows u + q * u_stride
//   gradient_group(du, du_stride, o, group, dwt, accumulate)
//                                                the group's rows -> one input channel's (Taps,
//                                                O) gradient, added after the first group
// with group g holding points g * kPoints / kGroups onwards. Its products run a group's points in
// parallel, so it is chosen where the threads are no more than a group's points.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_conv.hpp"

namespace scaffold::kernels::winograd {

// Floats from one point's rows to the next in a block's or chunk's transformed input or products
// (`rows` tiles of `ch` channels): one vector more than the rows take, so the points of a tile
// fall in different L1 sets. Unpadded, rows * ch is often a multiple of 4 KiB (96 tiles of 64
// channels: 24 KiB), and every point of a tile maps to the same set.
inline int64_t point_stride(int64_t rows, int64_t ch) {
  return rows * ch + simd::kVec;
}

// `n` floats, uninitialised (every element is written before it is read).
inline at::Tensor scratch(int64_t n) {
  return at::empty({n}, at::TensorOptions().dtype(at::kFloat));
}

// Tiles per block: the block's transformed input (P x T x C) and products (P x T x O) together
// about 1 MiB; a multiple of the product kernel's 6 rows.
inline int64_t block_tiles(int points, int64_t c, int64_t o) {
  const int64_t t = (int64_t{1} << 20) / (int64_t{points} * 4 * (c + o));
  return std::max<int64_t>(6, std::min<int64_t>(96, t / 6 * 6));
}

inline bool chunked_schedule(int points, int64_t c, int64_t o) {
  return block_tiles(points, c, o) < 18;
}

inline int64_t chunk_tiles(int points, int64_t tiles, int64_t c, int64_t o) {
  return std::max<int64_t>(
      1, std::min(tiles, winograd_chunk_bytes() / (int64_t{points} * (c + o) * 4)));
}

// Points begin .. end of the products over a chunk of nt tiles (`rows` of them in use, nt being
// the layout's stride: a block's last is short): out[p] = v[p] b[p] with b the transformed
// weights (forward), or out[p] (+)= v[p]^T b[p] with b the transformed output gradient
// (weights; `accumulate` after the first chunk). Compiled per ISA (winograd_schedule.cpp); the
// declaration carries the clones too, or a caller binds to one of them instead of the resolver.
SCAFFOLD_SIMD_CLONES void point_products(const float* v, const float* b, float* out, int64_t nt,
                                         int64_t c, int64_t o, int64_t begin, int64_t end,
                                         bool weights, bool accumulate, int64_t rows);

// U (P, C, O) for weights w (O, C, kernel...) of `Taps` taps: transform_channel(wt, o, u,
// u_stride) turns one input channel's (Taps, O) weights into its P rows u + p * u_stride.
// Uninitialised before the transform writes it (P C O floats: 64 MiB for the U-Net's 512-channel
// layers, rewritten each pass; a zero-filled buffer cost a pass over it first).
template <int P, int Taps, class TransformChannel>
at::Tensor transform_weights(const at::Tensor& w, TransformChannel transform_channel) {
  const int64_t o = w.size(0), c = w.size(1);
  const at::Tensor wt = w.reshape({o, c, Taps}).permute({1, 2, 0}).contiguous();  // (C, Taps, O)
  const float* src = wt.data_ptr<float>();
  at::Tensor u = at::empty({P, c, o}, at::TensorOptions().dtype(at::kFloat));
  float* dst = u.data_ptr<float>();
  kernels::parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ci = begin; ci < end; ++ci)
      transform_channel(src + ci * Taps * o, o, dst + ci * o, c * o);
  });
  return u;
}

// dw (O, C, kernel...) from its taps dwt (C, Taps, O).
inline at::Tensor weights_from_taps(const at::Tensor& dwt, at::IntArrayRef kernel) {
  std::vector<int64_t> shape{dwt.size(2), dwt.size(0)};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  return dwt.permute({2, 0, 1}).contiguous().view(shape);
}

// Its adjoint: dw (O, C, kernel...) from dU (P, C, O); gradient_channel(du, du_stride, o, dwt)
// writes one input channel's (Taps, O) gradient from its P rows du + p * du_stride.
template <int Taps, class GradientChannel>
at::Tensor weights_gradient(const float* du, int64_t o, int64_t c, at::IntArrayRef kernel,
                            GradientChannel gradient_channel) {
  at::Tensor dwt = at::empty({c, Taps, o}, at::TensorOptions().dtype(at::kFloat));
  float* dst = dwt.data_ptr<float>();
  kernels::parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ci = begin; ci < end; ++ci)
      gradient_channel(du + ci * o, c * o, o, dst + ci * Taps * o);
  });
  return weights_from_taps(dwt, kernel);
}

// The weights (O, C, taps...) as the groups schedule reads them: (C, Taps, O).
inline at::Tensor taps_by_channel(const at::Tensor& w) {
  const int64_t o = w.size(0), c = w.size(1);
  return w.reshape({o, c, -1}).permute({1, 2, 0}).contiguous();
}

// Whether a layer of c -> o channels over `tiles` tiles takes the groups schedule (for a scheme
// with kGroups > 0).
template <class S>
bool grouped_schedule(int64_t tiles, int64_t c, int64_t o) {
  constexpr int kP = S::kPoints;
  return chunked_schedule(kP, c, o) && chunk_tiles(kP, tiles, c, o) == tiles &&
         at::get_num_threads() <= kP / S::kGroups;
}

// The groups schedule's buffers: every tile's transformed input (v) and products or transformed
// output gradient (m), and one group's transformed weights or weight-gradient products (u).
template <class S>
struct GroupBuffers {
  static constexpr int kP = S::kPoints, kG = kP / S::kGroups;
  int64_t c, o, nt, vs, ms;
  at::Tensor vt, mt, ut;
  float *v, *m, *u;
  GroupBuffers(const typename S::Grid& g, const typename S::Grid& gy)
      : c(g.c),
        o(gy.c),
        nt(g.tiles()),
        vs(point_stride(nt, c)),
        ms(point_stride(nt, o)),
        vt(scratch(kP * vs)),
        mt(scratch(kP * ms)),
        ut(scratch(kG * c * o)),
        v(vt.data_ptr<float>()),
        m(mt.data_ptr<float>()),
        u(ut.data_ptr<float>()) {}
};

// y = conv(x, w) with w as taps_by_channel gives it, a group of points' weights at a time.
template <class S>
void forward_grouped(const float* x, const typename S::Grid& g, const float* wt,
                     const typename S::Grid& gy, float* y) {
  GroupBuffers<S> b(g, gy);
  const int64_t c = b.c, o = b.o, nt = b.nt;
  kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
    typename S::InputRows rows(x, g);
    S::input_tiles(rows, g, 0, nt, begin, end, b.v);
  });
  for (int group = 0; group < S::kGroups; ++group) {
    kernels::parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ci = begin; ci < end; ++ci)
        S::transform_group(wt + ci * S::kTaps * o, o, b.u + ci * o, c * o, group);
    });
    const int64_t p0 = int64_t{group} * b.kG;
    kernels::parallel_for(0, b.kG, 1, [&](int64_t begin, int64_t end) {
      point_products(b.v + p0 * b.vs, b.u, b.m + p0 * b.ms, nt, c, o, begin, end, false, false, nt);
    });
  }
  kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> stage(static_cast<std::size_t>(S::stage_floats(gy)));
    S::output_tiles(b.m, gy, 0, nt, begin, end, y, stage.data());
  });
}

// The weight gradient's taps (C, Taps, O), a group of points' products at a time.
template <class S>
at::Tensor weights_grouped(const float* x, const typename S::Grid& g, const float* dy,
                           const typename S::Grid& gy) {
  GroupBuffers<S> b(g, gy);
  const int64_t c = b.c, o = b.o, nt = b.nt;
  kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
    typename S::InputRows rows(x, g);
    std::vector<float> stage(static_cast<std::size_t>(S::stage_floats(gy)));
    S::input_tiles(rows, g, 0, nt, begin, end, b.v);
    S::grad_output_tiles(dy, gy, 0, nt, begin, end, b.m, stage.data());
  });
  at::Tensor dwt = at::empty({c, S::kTaps, o}, at::TensorOptions().dtype(at::kFloat));
  float* taps = dwt.data_ptr<float>();
  for (int group = 0; group < S::kGroups; ++group) {
    const int64_t p0 = int64_t{group} * b.kG;
    kernels::parallel_for(0, b.kG, 1, [&](int64_t begin, int64_t end) {
      point_products(b.v + p0 * b.vs, b.m + p0 * b.ms, b.u, nt, c, o, begin, end, true, false, nt);
    });
    kernels::parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ci = begin; ci < end; ++ci)
        S::gradient_group(b.u + ci * o, c * o, o, group, taps + ci * S::kTaps * o, group > 0);
    });
  }
  return weights_from_taps(dwt, S::kernel());
}

template <class S>
void forward_chunked(const float* x, const typename S::Grid& g, const float* u,
                     const typename S::Grid& gy, float* y) {
  constexpr int kP = S::kPoints;
  const int64_t c = g.c, o = gy.c, tiles = g.tiles(), ct = chunk_tiles(kP, tiles, c, o);
  const at::Tensor vt = scratch(kP * point_stride(ct, c)), mt = scratch(kP * point_stride(ct, o));
  float *v = vt.data_ptr<float>(), *m = mt.data_ptr<float>();
  for (int64_t t0 = 0; t0 < tiles; t0 += ct) {
    const int64_t nt = std::min(ct, tiles - t0);
    kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
      typename S::InputRows rows(x, g);
      S::input_tiles(rows, g, t0, nt, begin, end, v);
    });
    kernels::parallel_for(0, kP, 1, [&](int64_t begin, int64_t end) {
      point_products(v, u, m, nt, c, o, begin, end, false, false, nt);
    });
    kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
      std::vector<float> stage(static_cast<std::size_t>(S::stage_floats(gy)));
      S::output_tiles(m, gy, t0, nt, begin, end, y, stage.data());
    });
  }
}

template <class S>
at::Tensor weights_chunked(const float* x, const typename S::Grid& g, const float* dy,
                           const typename S::Grid& gy) {
  constexpr int kP = S::kPoints;
  const int64_t c = g.c, o = gy.c, tiles = g.tiles(), ct = chunk_tiles(kP, tiles, c, o);
  const at::Tensor vt = scratch(kP * point_stride(ct, c)), mt = scratch(kP * point_stride(ct, o)),
                   dut = scratch(kP * c * o);
  float *v = vt.data_ptr<float>(), *m = mt.data_ptr<float>(), *du = dut.data_ptr<float>();
  for (int64_t t0 = 0; t0 < tiles; t0 += ct) {
    const int64_t nt = std::min(ct, tiles - t0);
    kernels::parallel_for(0, nt, 8, [&](int64_t begin, int64_t end) {
      typename S::InputRows rows(x, g);
      std::vector<float> stage(static_cast<std::size_t>(S::stage_floats(gy)));
      S::input_tiles(rows, g, t0, nt, begin, end, v);
      S::grad_output_tiles(dy, gy, t0, nt, begin, end, m, stage.data());
    });
    kernels::parallel_for(0, kP, 1, [&](int64_t begin, int64_t end) {
      point_products(v, m, du, nt, c, o, begin, end, true, t0 > 0, nt);
    });
  }
  return S::weights_gradient(du, o, c);
}

// y = conv(x, weights transformed to u (P, C, O)); x described by g, y by gy (O channels).
template <class S>
void forward(const float* x, const typename S::Grid& g, const float* u, const typename S::Grid& gy,
             float* y) {
  constexpr int kP = S::kPoints;
  const int64_t c = g.c, o = gy.c;
  if (chunked_schedule(kP, c, o)) return forward_chunked<S>(x, g, u, gy, y);
  const int64_t tiles = g.tiles(), bt = block_tiles(kP, c, o);
  const int64_t blocks = (tiles + bt - 1) / bt;
  kernels::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> v(kP * point_stride(bt, c)), m(kP * point_stride(bt, o)),
        stage(S::stage_floats(gy));
    typename S::InputRows rows(x, g);
    for (int64_t b = begin; b < end; ++b) {
      // One block: tiles t0 .. t0 + nt, laid out for bt.
      const int64_t t0 = b * bt, nt = std::min(bt, tiles - t0);
      S::input_tiles(rows, g, t0, bt, 0, nt, v.data());
      point_products(v.data(), u, m.data(), bt, c, o, 0, kP, false, false, nt);
      S::output_tiles(m.data(), gy, t0, bt, 0, nt, y, stage.data());
    }
  });
}

// y = conv(x, w) for w (O, C, kernel...) contiguous: by the groups schedule where the scheme has
// one and the layer takes it, else with every point's weights transformed (S::transform_weights)
// and forward()'s blocks or chunks.
template <class S>
void forward_weights(const float* x, const typename S::Grid& g, const at::Tensor& w,
                     const typename S::Grid& gy, float* y) {
  if constexpr (S::kGroups > 0) {
    if (grouped_schedule<S>(g.tiles(), g.c, gy.c)) {
      const at::Tensor wt = taps_by_channel(w);
      forward_grouped<S>(x, g, wt.data_ptr<float>(), gy, y);
      return;
    }
  }
  const at::Tensor u = S::transform_weights(w);
  forward<S>(x, g, u.data_ptr<float>(), gy, y);
}

// dU (P, C, O) = sum over tiles of V(x)^T dM(dy); then dw from it (S::weights_gradient).
template <class S>
at::Tensor weights(const float* x, const typename S::Grid& g, const float* dy,
                   const typename S::Grid& gy) {
  constexpr int kP = S::kPoints;
  const int64_t c = g.c, o = gy.c;
  if constexpr (S::kGroups > 0)
    if (grouped_schedule<S>(g.tiles(), c, o)) return weights_grouped<S>(x, g, dy, gy);
  if (chunked_schedule(kP, c, o)) return weights_chunked<S>(x, g, dy, gy);
  const int64_t tiles = g.tiles(), bt = block_tiles(kP, c, o);
  const int64_t blocks = (tiles + bt - 1) / bt;
  std::vector<std::vector<float>> partial(static_cast<std::size_t>(at::get_num_threads()));
  kernels::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float>& du = partial.at(static_cast<std::size_t>(at::get_thread_num()));
    if (du.empty()) du.assign(static_cast<std::size_t>(kP * c * o), 0.f);
    std::vector<float> v(kP * point_stride(bt, c)), m(kP * point_stride(bt, o)),
        stage(S::stage_floats(gy));
    typename S::InputRows rows(x, g);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t t0 = b * bt, nt = std::min(bt, tiles - t0);
      S::input_tiles(rows, g, t0, bt, 0, nt, v.data());
      S::grad_output_tiles(dy, gy, t0, bt, 0, nt, m.data(), stage.data());
      point_products(v.data(), m.data(), du.data(), bt, c, o, 0, kP, true, true, nt);
    }
  });
  // The threads' partial sums added into the first one, in parallel over its elements.
  std::vector<float*> parts;
  for (auto& du : partial)
    if (!du.empty()) parts.push_back(du.data());
  if (parts.empty()) throw core::Error("Winograd convolution: the weight gradient ran no block");
  float* sum = parts.front();
  kernels::parallel_for(0, kP * c * o, 4096, [&](int64_t begin, int64_t end) {
    for (std::size_t q = 1; q < parts.size(); ++q)
      for (int64_t i = begin; i < end; ++i) sum[i] += parts[q][i];
  });
  return S::weights_gradient(sum, o, c);
}

}  // namespace scaffold::kernels::winograd
