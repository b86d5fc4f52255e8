// The loops of batched_matmul and its autograd function. Forward and the gradient of b accumulate
// rows of b (or of the output's gradient) scaled by entries of a, so the innermost loop runs along
// contiguous rows of N; the gradient of a is dot products along those rows.
#include "kernels/batched_matmul.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
// Named, not anonymous: the kernels library is a unity build, and other files have their own Dims,
// kLanes and forward_impl.
namespace batched {

struct Dims {
  int64_t k, m, i, n;
};

constexpr int kLanes = 16;  // partial sums of a dot product

// c[k] = a[k] b[k] for k in [k0, k1).
template <typename T>
SCAFFOLD_SIMD_INLINE void forward_impl(const T* a, const T* b, T* c, Dims d, int64_t k0,
                                       int64_t k1) {
  for (int64_t k = k0; k < k1; ++k) {
    const T* ak = a + k * d.m * d.i;
    const T* bk = b + k * d.i * d.n;
    T* ck = c + k * d.m * d.n;
    for (int64_t r = 0; r < d.m; ++r) {
      T* row = ck + r * d.n;
      for (int64_t j = 0; j < d.n; ++j) row[j] = T(0);
      for (int64_t p = 0; p < d.i; ++p) {
        const T s = ak[r * d.i + p];
        const T* brow = bk + p * d.n;
        for (int64_t j = 0; j < d.n; ++j) row[j] += s * brow[j];
      }
    }
  }
}

// da[k] = dc[k] b[k]^T: da[k][r][p] = sum_j dc[k][r][j] b[k][p][j].
template <typename T>
SCAFFOLD_SIMD_INLINE void grad_a_impl(const T* dc, const T* b, T* da, Dims d, int64_t k0,
                                      int64_t k1) {
  for (int64_t k = k0; k < k1; ++k) {
    const T* dck = dc + k * d.m * d.n;
    const T* bk = b + k * d.i * d.n;
    T* dak = da + k * d.m * d.i;
    for (int64_t r = 0; r < d.m; ++r)
      for (int64_t p = 0; p < d.i; ++p) {
        const T* x = dck + r * d.n;
        const T* y = bk + p * d.n;
        // Independent partial sums per lane: a loop the compiler vectorises without reordering
        // one sum's additions.
        T lanes[kLanes] = {};
        int64_t j = 0;
        for (; j + kLanes <= d.n; j += kLanes)
          for (int l = 0; l < kLanes; ++l) lanes[l] += x[j + l] * y[j + l];
        for (; j < d.n; ++j) lanes[0] += x[j] * y[j];
        T sum = T(0);
        for (int l = 0; l < kLanes; ++l) sum += lanes[l];
        dak[r * d.i + p] = sum;
      }
  }
}

// db[k] = a[k]^T dc[k]: db[k][p] = sum_r a[k][r][p] dc[k][r].
template <typename T>
SCAFFOLD_SIMD_INLINE void grad_b_impl(const T* a, const T* dc, T* db, Dims d, int64_t k0,
                                      int64_t k1) {
  for (int64_t k = k0; k < k1; ++k) {
    const T* ak = a + k * d.m * d.i;
    const T* dck = dc + k * d.m * d.n;
    T* dbk = db + k * d.i * d.n;
    for (int64_t j = 0; j < d.i * d.n; ++j) dbk[j] = T(0);
    for (int64_t r = 0; r < d.m; ++r)
      for (int64_t p = 0; p < d.i; ++p) {
        const T s = ak[r * d.i + p];
        const T* row = dck + r * d.n;
        T* out = dbk + p * d.n;
        for (int64_t j = 0; j < d.n; ++j) out[j] += s * row[j];
      }
  }
}

#define SCAFFOLD_BATCHED_MATMUL_KERNELS(T)                                                  \
  SCAFFOLD_SIMD_CLONES void forward_loop(const T* a, const T* b, T* c, Dims d, int64_t k0,  \
                                         int64_t k1) {                                      \
    forward_impl(a, b, c, d, k0, k1);                                                       \
  }                                                                                         \
  SCAFFOLD_SIMD_CLONES void grad_a_loop(const T* dc, const T* b, T* da, Dims d, int64_t k0, \
                                        int64_t k1) {                                       \
    grad_a_impl(dc, b, da, d, k0, k1);                                                      \
  }                                                                                         \
  SCAFFOLD_SIMD_CLONES void grad_b_loop(const T* a, const T* dc, T* db, Dims d, int64_t k0, \
                                        int64_t k1) {                                       \
    grad_b_impl(a, dc, db, d, k0, k1);                                                      \
  }
SCAFFOLD_BATCHED_MATMUL_KERNELS(float)
SCAFFOLD_BATCHED_MATMUL_KERNELS(double)
#undef SCAFFOLD_BATCHED_MATMUL_KERNELS

// Batch entries per parallel task: enough work per task to amortise its start.
int64_t grain(const Dims& d) {
  const int64_t per_entry = std::max<int64_t>(1, d.m * d.i * d.n);
  return std::max<int64_t>(1, 32768 / per_entry);
}

Dims dims_of(const at::Tensor& a, const at::Tensor& b) {
  return {a.size(0), a.size(1), a.size(2), b.size(2)};
}

at::Tensor forward_product(const at::Tensor& a, const at::Tensor& b) {
  const Dims d = dims_of(a, b);
  at::Tensor c = at::empty({d.k, d.m, d.n}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "batched_matmul", [&] {
    const scalar_t *pa = a.data_ptr<scalar_t>(), *pb = b.data_ptr<scalar_t>();
    scalar_t* pc = c.data_ptr<scalar_t>();
    kernels::parallel_for(0, d.k, grain(d),
                          [&](int64_t k0, int64_t k1) { forward_loop(pa, pb, pc, d, k0, k1); });
  });
  return c;
}

class BatchedMatmul : public torch::autograd::Function<BatchedMatmul> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a,
                            const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return forward_product(a, b);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const at::Tensor dc = grads.at(0).to(a.scalar_type()).contiguous();
    const Dims d = dims_of(a, b);
    at::Tensor da, db;
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "batched_matmul_backward", [&] {
      const scalar_t *pa = a.data_ptr<scalar_t>(), *pb = b.data_ptr<scalar_t>(),
                     *pdc = dc.data_ptr<scalar_t>();
      if (ctx->needs_input_grad(0)) {
        da = at::empty_like(a);
        scalar_t* p = da.data_ptr<scalar_t>();
        kernels::parallel_for(0, d.k, grain(d),
                              [&](int64_t k0, int64_t k1) { grad_a_loop(pdc, pb, p, d, k0, k1); });
      }
      if (ctx->needs_input_grad(1)) {
        db = at::empty_like(b);
        scalar_t* p = db.data_ptr<scalar_t>();
        kernels::parallel_for(0, d.k, grain(d),
                              [&](int64_t k0, int64_t k1) { grad_b_loop(pa, pdc, p, d, k0, k1); });
      }
    });
    return {da, db};
  }
};

}  // namespace batched

bool batched_matmul_supported(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.device().is_cpu() || !b.device().is_cpu()) return false;
  if (a.scalar_type() != b.scalar_type()) return false;
  if (a.scalar_type() != at::kFloat && a.scalar_type() != at::kDouble) return false;
  return a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1);
}

at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!batched_matmul_supported(a, b))
    throw core::Error(fmt::format(
        "batched_matmul: expected CPU float32 or float64 tensors (K, M, I) and (K, I, N), got {} "
        "{} on {} and {} {} on {}",
        fmt::join(a.sizes(), "x"), c10::toString(a.scalar_type()), a.device().str(),
        fmt::join(b.sizes(), "x"), c10::toString(b.scalar_type()), b.device().str()));
  return batched::BatchedMatmul::apply(a.contiguous(), b.contiguous());
}

}  // namespace scaffold::kernels
