// The Winograd convolutions' shared pieces that are compiled once (winograd_schedule.hpp): the
// point products, per ISA, and the chunk scratch bound.
#include "kernels/winograd_schedule.hpp"

#include <atomic>

#include "kernels/winograd_gemm.hpp"

namespace scaffold::kernels {
namespace {

std::atomic<int64_t> chunk_bytes{int64_t{16} << 20};

}  // namespace

void set_winograd_chunk_bytes(int64_t bytes) {
  chunk_bytes = std::max<int64_t>(1, bytes);
}

int64_t winograd_chunk_bytes() {
  return chunk_bytes.load();
}

namespace winograd {

SCAFFOLD_SIMD_CLONES void point_products(const float* v, const float* b, float* out, int64_t nt,
                                         int64_t c, int64_t o, int64_t begin, int64_t end,
                                         bool weights, bool accumulate, int64_t rows) {
  const bool wide = simd::wide_registers();
  for (int64_t p = begin; p < end; ++p) {
    const float* vp = v + p * point_stride(nt, c);
    if (weights)
      gemm(vp, 1, c, b + p * point_stride(nt, o), o, out + p * c * o, o, c, o, rows, accumulate,
           wide);
    else
      gemm(vp, c, 1, b + p * c * o, o, out + p * point_stride(nt, o), o, rows, o, c, false, wide);
  }
}

}  // namespace winograd
}  // namespace scaffold::kernels
