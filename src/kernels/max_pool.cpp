#include "kernels/max_pool.hpp"

#include <c10/util/BFloat16.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

// An input (N, C, D, H, W) and its pooled output (N, C, D/2, H/2, W/2).
struct PoolShape {
  int64_t planes, d, h, w, od, oh, ow;
  explicit PoolShape(const at::Tensor& x)
      : planes(x.size(0) * x.size(1)),
        d(x.size(2)),
        h(x.size(3)),
        w(x.size(4)),
        od(x.size(2) / 2),
        oh(x.size(3) / 2),
        ow(x.size(4) / 2) {}
};

// One output row: y[xo] and arg[xo] from input rows r[q] (q = a * 2 + b), window position
// k = q * 2 + c, c the offset along W (LibTorch's scan order).
template <typename T>
SCAFFOLD_SIMD_INLINE void pool_row(const T* const (&r)[4], int64_t ow, T* y, uint8_t* arg) {
  for (int64_t xo = 0; xo < ow; ++xo) {
    float best = -INFINITY;
    uint8_t k_best = 0;
    for (int q = 0; q < 4; ++q)
      for (int c = 0; c < 2; ++c) {
        const float v = static_cast<float>(r[q][2 * xo + c]);
        if (v > best || std::isnan(v)) {
          best = v;
          k_best = static_cast<uint8_t>(q * 2 + c);
        }
      }
    y[xo] = static_cast<T>(best);
    arg[xo] = k_best;
  }
}

// Input-gradient row (z, y) of window row q = (z % 2) * 2 + y % 2: the window's gradient at its
// winner, zero elsewhere, and zero past the last whole window.
template <typename T>
SCAFFOLD_SIMD_INLINE void unpool_row(const T* dy, const uint8_t* arg, int64_t ow, int64_t w, int q,
                                     T* row) {
  for (int64_t xo = 0; xo < ow; ++xo) {
    const int k = arg[xo];
    row[2 * xo] = k == q * 2 ? dy[xo] : T(0);
    row[2 * xo + 1] = k == q * 2 + 1 ? dy[xo] : T(0);
  }
  for (int64_t xx = 2 * ow; xx < w; ++xx) row[xx] = T(0);
}

template <typename T>
SCAFFOLD_SIMD_INLINE void pool_rows(const T* x, const PoolShape& s, int64_t begin, int64_t end,
                                    T* y, uint8_t* arg) {
  for (int64_t pz = begin; pz < end; ++pz) {
    const int64_t plane = pz / s.od, zo = pz % s.od;
    for (int64_t yo = 0; yo < s.oh; ++yo) {
      const T* r[4];
      for (int q = 0; q < 4; ++q)
        r[q] = x + ((plane * s.d + 2 * zo + q / 2) * s.h + 2 * yo + q % 2) * s.w;
      const int64_t o = ((plane * s.od + zo) * s.oh + yo) * s.ow;
      pool_row(r, s.ow, y + o, arg + o);
    }
  }
}

template <typename T>
SCAFFOLD_SIMD_INLINE void unpool_rows(const T* dy, const uint8_t* arg, const PoolShape& s,
                                      int64_t begin, int64_t end, T* dx) {
  for (int64_t pz = begin; pz < end; ++pz) {
    const int64_t plane = pz / s.d, z = pz % s.d, zo = z / 2;
    for (int64_t yy = 0; yy < s.h; ++yy) {
      T* row = dx + (pz * s.h + yy) * s.w;
      const int64_t yo = yy / 2;
      if (zo >= s.od || yo >= s.oh) {
        for (int64_t xx = 0; xx < s.w; ++xx) row[xx] = T(0);
        continue;
      }
      const int64_t o = ((plane * s.od + zo) * s.oh + yo) * s.ow;
      unpool_row(dy + o, arg + o, s.ow, s.w, static_cast<int>((z % 2) * 2 + yy % 2), row);
    }
  }
}

// Each element type's clones (target_clones does not clone function templates): the compiler
// vectorises the window loops for the ISA of each.
SCAFFOLD_SIMD_CLONES void pool_rows_of(const float* x, const PoolShape& s, int64_t begin,
                                       int64_t end, float* y, uint8_t* arg) {
  pool_rows(x, s, begin, end, y, arg);
}
SCAFFOLD_SIMD_CLONES void pool_rows_of(const at::BFloat16* x, const PoolShape& s, int64_t begin,
                                       int64_t end, at::BFloat16* y, uint8_t* arg) {
  pool_rows(x, s, begin, end, y, arg);
}
SCAFFOLD_SIMD_CLONES void unpool_rows_of(const float* dy, const uint8_t* arg, const PoolShape& s,
                                         int64_t begin, int64_t end, float* dx) {
  unpool_rows(dy, arg, s, begin, end, dx);
}
SCAFFOLD_SIMD_CLONES void unpool_rows_of(const at::BFloat16* dy, const uint8_t* arg,
                                         const PoolShape& s, int64_t begin, int64_t end,
                                         at::BFloat16* dx) {
  unpool_rows(dy, arg, s, begin, end, dx);
}

template <typename T>
void pool_forward(const T* x, const PoolShape& s, T* y, uint8_t* arg) {
  kernels::parallel_for(0, s.planes * s.od, 1, [&](int64_t begin, int64_t end) {
    pool_rows_of(x, s, begin, end, y, arg);
  });
}

// dx: each window's gradient at its winner, zero at the rest of the window and at the voxels no
// window covers (the last of an odd size). Every element of dx is written once.
template <typename T>
void pool_backward(const T* dy, const uint8_t* arg, const PoolShape& s, T* dx) {
  kernels::parallel_for(0, s.planes * s.d, 1, [&](int64_t begin, int64_t end) {
    unpool_rows_of(dy, arg, s, begin, end, dx);
  });
}

class MaxPoolK2S2Function : public torch::autograd::Function<MaxPoolK2S2Function> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    const PoolShape s(x);
    at::Tensor y = at::empty({x.size(0), x.size(1), s.od, s.oh, s.ow}, x.options());
    at::Tensor arg = at::empty(y.sizes(), x.options().dtype(at::kByte));
    if (x.scalar_type() == at::kBFloat16)
      pool_forward(x.data_ptr<at::BFloat16>(), s, y.data_ptr<at::BFloat16>(),
                   arg.data_ptr<uint8_t>());
    else
      pool_forward(x.data_ptr<float>(), s, y.data_ptr<float>(), arg.data_ptr<uint8_t>());
    ctx->save_for_backward({arg});
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["bf16"] = x.scalar_type() == at::kBFloat16;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const at::Tensor arg = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const at::Tensor dy = grads.at(0).to(bf16 ? at::kBFloat16 : at::kFloat).contiguous();
    at::Tensor dx = at::empty(sizes, dy.options());
    const PoolShape s(dx);
    if (bf16)
      pool_backward(dy.data_ptr<at::BFloat16>(), arg.data_ptr<uint8_t>(), s,
                    dx.data_ptr<at::BFloat16>());
    else
      pool_backward(dy.data_ptr<float>(), arg.data_ptr<uint8_t>(), s, dx.data_ptr<float>());
    return {dx};
  }
};

}  // namespace

bool max_pool3d_k2s2_supported(const at::Tensor& x) {
  return x.defined() && x.device().is_cpu() && x.dim() == 5 && x.is_contiguous() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
}

at::Tensor max_pool3d_k2s2(const at::Tensor& x) {
  if (!max_pool3d_k2s2_supported(x))
    throw core::Error(fmt::format(
        "max_pool3d_k2s2: unsupported input {} {} on {}{}; it takes contiguous float32 or bf16 CPU "
        "tensors (N, C, D, H, W)",
        fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()), x.device().str(),
        x.is_contiguous() ? "" : " (not contiguous)"));
  return MaxPoolK2S2Function::apply(x);
}

}  // namespace scaffold::kernels
