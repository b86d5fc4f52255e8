// 16-float vectors (GCC vector extensions, which clang has too) for the hand-written CPU kernels
// (Winograd convolution). Each kernel's hot function is compiled three times by target_clones
// (AVX-512, 256-bit AVX with FMA, baseline) and picked at load time for the CPU it runs on; the
// helpers it calls must be always_inline so they are compiled inside each clone. Lambdas are not:
// a lambda in a clone is compiled for the baseline ISA, so hot loops stay plain loops.
//
// The middle clone is "fma", not "avx2": an avx2 target does not include FMA, so that clone ran
// every a * b + c as a multiply and an add (measured on a Zen 3: the Winograd convolutions 10-30 %
// slower; on Intel cores without AVX-512, whose adds share the FMA ports, half the rate).
// target_clones takes one feature per clone, and its "arch=x86-64-v3" is dispatched on the CPU's
// model, not its features (a Zen 3 got the baseline), so the clone is "fma", which implies AVX
// (256-bit float arithmetic) but not AVX2's 256-bit integer instructions: the few integer vector
// steps (exp's exponent bits, bf16 shifts) run in two 128-bit halves there. Every CPU with AVX2
// has FMA. The multiply-adds are written a * b + c and contracted by the compiler (clang's
// default -ffp-contract=on; GCC builds add -ffp-contract=fast to the kernels, src/CMakeLists.txt);
// fused_multiply_add() below lets a test check that the clone a CPU runs does fuse them.
//
// Helpers take and give vectors by reference, never by value: clang checks a call's vector ABI
// before inlining, and a 64-byte vector passed by value from the AVX-512 clone to a helper
// compiled for the baseline is an error there (a warning when neither has AVX-512). After
// inlining, references and values compile to the same registers.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

#pragma GCC diagnostic ignored "-Wpsabi"  // vector values never cross a call boundary

#define SCAFFOLD_SIMD_INLINE inline __attribute__((always_inline))
#define SCAFFOLD_SIMD_CLONES __attribute__((target_clones("avx512f", "fma", "default")))

namespace scaffold::kernels::simd {

constexpr int kVec = 16;  // floats per vector (one AVX-512 register, two AVX2 ones)

using v16 = float __attribute__((vector_size(64)));
using i16 = int32_t __attribute__((vector_size(64)));
// A vector of type V at any float's address. Packed, so every compiler reads and writes it
// unaligned: a vector lvalue (or a vector typedef with a smaller alignment, which clang ignores
// there) is assumed aligned to its size. Read it with `x = loadv(p).v` (a reference cannot bind to
// the packed member, so a helper never sees it in place; clang 14 binds one anyway where a call
// takes `loadv(p).v` as a `const v16&`, and then loads it aligned: copy it into a local first).
template <typename V>
struct __attribute__((packed, may_alias)) At {
  V v;
};
using VecAt = At<v16>;

SCAFFOLD_SIMD_INLINE const VecAt& loadv(const float* p) {
  return *reinterpret_cast<const VecAt*>(p);
}
SCAFFOLD_SIMD_INLINE void storev(float* p, const v16& v) {
  reinterpret_cast<VecAt*>(p)->v = v;
}

// 8 floats, one AVX register: for tiles sized for 16 such registers (sgemm.cpp), read and written
// as v16 above.
using v8 = float __attribute__((vector_size(32)));
SCAFFOLD_SIMD_INLINE const At<v8>& load8(const float* p) {
  return *reinterpret_cast<const At<v8>*>(p);
}
SCAFFOLD_SIMD_INLINE void store8(float* p, const v8& v) {
  reinterpret_cast<At<v8>*>(p)->v = v;
}

// Whether the register-tiled products (Winograd's point products, attention's) may size their
// tiles for 32 registers of a whole v16 (AVX-512, whose clone the resolver picks on exactly these
// CPUs); otherwise they tile for 16 registers of half a v16 each (AVX, the fma clone), where the
// AVX-512 tiles spill (measured on a Zen 3: the Winograd products ran at half the speed,
// docs/performance.md). Tests force either tiling on any CPU (the wide one spills on AVX2: slow,
// not wrong) with force_wide_registers(0 or 1); -1 follows CPUID again.
inline std::atomic<int> wide_registers_forced{-1};
inline void force_wide_registers(int wide) {
  wide_registers_forced.store(wide);
}
inline bool wide_registers() {
  const int forced = wide_registers_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return forced != 0;
  static const bool wide = __builtin_cpu_supports("avx512f") != 0;
  return wide;
}

// e^y, y clamped to [-87, 88]: y = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial of
// degree 6 (relative error < 3e-7 on that interval), 2^n through the exponent bits. Branch-free,
// so the loops calling it vectorise.
SCAFFOLD_SIMD_INLINE float exp_approx(float y) {
  y = std::fmin(std::fmax(y, -87.0f), 88.0f);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (y * 1.44269504088896341f + shifter) - shifter;
  const float r = (y - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto scale = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

SCAFFOLD_SIMD_INLINE float from_bf16(uint16_t b) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(b) << 16);
}

// Round to nearest even, as c10::BFloat16 does for finite values (a NaN stays a NaN: its high
// mantissa bit is set, so the carry cannot reach the exponent).
SCAFFOLD_SIMD_INLINE uint16_t to_bf16(float f) {
  const auto u = __builtin_bit_cast(uint32_t, f);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// out = a * b + c over 16 floats, one v16 expression compiled in SCAFFOLD_SIMD_CLONES's clones as
// the kernels' are, computed by the clone this CPU runs: each element rounded once where that
// clone fuses the multiply-add, twice where it does not (a test's check of the clones).
void fused_multiply_add(const float* a, const float* b, const float* c, float* out);

// The float32 multiply-add peak of this CPU on `threads` of LibTorch's threads (0: all of them),
// in GFLOP/s (a multiply-add is 2): each thread runs independent chains of v16 multiply-adds on
// registers only (12 v16 with AVX-512, 6 otherwise: 12 vector registers either way, more chains
// than 2 FMA units x 4-5 cycles of latency need, no spill) in the kernels' clone for this CPU,
// each run lasting between half of `seconds` and `seconds`; the best of 5 such timings. What
// no float32 product can exceed here: benches divide a step's FLOPs by it for a lower bound on
// the step's time (bench_gpt_step).
double fma_peak_gflops(int threads = 0, double seconds = 0.1);

}  // namespace scaffold::kernels::simd
