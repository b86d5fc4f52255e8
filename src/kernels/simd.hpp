// 16-float vectors (GCC vector extensions) for the hand-written CPU kernels (Winograd
// convolution, max pool). Each kernel's hot function is compiled three times by target_clones
// (AVX-512, AVX2, baseline) and picked at load time for the CPU it runs on; the helpers it calls
// must be always_inline so they are compiled inside each clone. Lambdas are not: a lambda in a
// clone is compiled for the baseline ISA, so hot loops stay plain loops.
#pragma once

#include <cstdint>
#include <cstring>

#pragma GCC diagnostic ignored "-Wpsabi"  // vector values never cross a call boundary

#define SCAFFOLD_SIMD_INLINE inline __attribute__((always_inline))
#define SCAFFOLD_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace scaffold::model::simd {

constexpr int kVec = 16;  // floats per vector (one AVX-512 register, two AVX2 ones)

using v16 = float __attribute__((vector_size(64)));
using i16 = int32_t __attribute__((vector_size(64)));

SCAFFOLD_SIMD_INLINE v16 loadv(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
SCAFFOLD_SIMD_INLINE void storev(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace scaffold::model::simd
