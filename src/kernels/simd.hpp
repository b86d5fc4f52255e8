// 16-float vectors (GCC vector extensions, which clang has too) for the hand-written CPU kernels
// (Winograd convolution). Each kernel's hot function is compiled three times by target_clones
// (AVX-512, AVX2, baseline) and picked at load time for the CPU it runs on; the helpers it calls
// must be always_inline so they are compiled inside each clone. Lambdas are not: a lambda in a
// clone is compiled for the baseline ISA, so hot loops stay plain loops.
//
// Helpers take and give vectors by reference, never by value: clang checks a call's vector ABI
// before inlining, and a 64-byte vector passed by value from the AVX-512 clone to a helper
// compiled for the baseline is an error there (a warning when neither has AVX-512). After
// inlining, references and values compile to the same registers.
#pragma once

#include <cstdint>

#pragma GCC diagnostic ignored "-Wpsabi"  // vector values never cross a call boundary

#define SCAFFOLD_SIMD_INLINE inline __attribute__((always_inline))
#define SCAFFOLD_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace scaffold::kernels::simd {

constexpr int kVec = 16;  // floats per vector (one AVX-512 register, two AVX2 ones)

using v16 = float __attribute__((vector_size(64)));
using i16 = int32_t __attribute__((vector_size(64)));
// A vector at any float's address. Packed, so every compiler reads and writes it unaligned: a
// v16 lvalue (or a vector typedef with a smaller alignment, which clang ignores there) is assumed
// 64-byte aligned. Read it with `x = loadv(p).v` (a reference cannot bind to the packed member,
// so a helper never sees it in place).
struct __attribute__((packed, may_alias)) VecAt {
  v16 v;
};

SCAFFOLD_SIMD_INLINE const VecAt& loadv(const float* p) {
  return *reinterpret_cast<const VecAt*>(p);
}
SCAFFOLD_SIMD_INLINE void storev(float* p, const v16& v) {
  reinterpret_cast<VecAt*>(p)->v = v;
}

}  // namespace scaffold::kernels::simd
