#include "workloads/scaffold/fractal/chaos_game.hpp"

#include <cmath>
#include <cstring>

#include "core/rng.hpp"

namespace scaffold::fractal {

int lanes_for_points(int64_t n) {
  constexpr std::size_t kMaxLaneBufferBytes = std::size_t{512} << 20;
  const std::size_t per_cloud = static_cast<std::size_t>(n) * 3 * sizeof(double);
  return per_cloud * kLanes <= kMaxLaneBufferBytes ? kLanes : 1;
}

bool chaos_game_reference(const IfsParams& params, uint64_t rng_key, int64_t n, double* out) {
  if (n <= 0) return false;
  core::Xoshiro256p rng(rng_key);
  double x = 0.0, y = 0.0, z = 0.0;
  out[0] = out[1] = out[2] = 0.0;
  bool runaway = false;
  const double p0 = params.maps[0][kProbabilityColumn];
  for (int64_t i = 1; i < n; ++i) {
    const double r = rng.uniform01();
    const auto& m = params.maps[r < p0 ? 0 : 1];
    const double nx = ((m[0] * x + m[1] * y) + m[2] * z) + m[9];
    const double ny = ((m[3] * x + m[4] * y) + m[5] * z) + m[10];
    const double nz = ((m[6] * x + m[7] * y) + m[8] * z) + m[11];
    x = nx;
    y = ny;
    z = nz;
    runaway |= std::fabs(x) > kRunawayLimit || std::fabs(y) > kRunawayLimit ||
               std::fabs(z) > kRunawayLimit;
    out[3 * i] = x;
    out[3 * i + 1] = y;
    out[3 * i + 2] = z;
  }
  return runaway;
}

namespace {

// GCC/Clang vector extensions: portable (SSE2 splits each op in two; AVX2 clones use ymm).
typedef double VecD __attribute__((vector_size(kLanes * sizeof(double))));
typedef uint64_t VecU __attribute__((vector_size(kLanes * sizeof(uint64_t))));
typedef int64_t VecI __attribute__((vector_size(kLanes * sizeof(int64_t))));

inline VecU as_u(VecD v) {
  VecU u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
inline uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
inline VecD as_d(VecU u) {
  VecD v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace

// Multi-versioned on x86-64: the loader picks the widest clone the CPU supports. The clones
// compute identical values (no FMA: -ffp-contract=off on this library).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void chaos_game_lanes(const IfsParams* const params[kLanes], const uint64_t rng_keys[kLanes],
                      int64_t n, double* const out[kLanes], bool runaway[kLanes]) {
  if (n <= 0) {
    for (int l = 0; l < kLanes; ++l) runaway[l] = false;
    return;
  }
  // Coefficient k of map t, one lane per cloud; selection is a bitwise blend on the lane mask.
  VecU coef0[kAffineParams], coef1[kAffineParams];
  VecD p0;
  VecU s0, s1, s2, s3;  // xoshiro256+ state, one stream per lane
  for (int l = 0; l < kLanes; ++l) {
    for (int k = 0; k < kAffineParams; ++k) {
      coef0[k][l] = double_bits(params[l]->maps[0][k]);
      coef1[k][l] = double_bits(params[l]->maps[1][k]);
    }
    p0[l] = params[l]->maps[0][kProbabilityColumn];
    const core::Xoshiro256p seeded(rng_keys[l]);
    s0[l] = seeded.state()[0];
    s1[l] = seeded.state()[1];
    s2[l] = seeded.state()[2];
    s3[l] = seeded.state()[3];
  }
  const VecU exponent_one = VecU{} + 0x3ff0000000000000ULL;
  const VecU abs_mask = VecU{} + 0x7fffffffffffffffULL;
  const VecD limit = VecD{} + kRunawayLimit;
  VecD x = VecD{}, y = VecD{}, z = VecD{};
  VecI ran_away = VecI{};
  for (int l = 0; l < kLanes; ++l) out[l][0] = out[l][1] = out[l][2] = 0.0;

  for (int64_t i = 1; i < n; ++i) {
    // xoshiro256+ step and the [0,1) double, exactly as core::Xoshiro256p::uniform01.
    const VecU bits = s0 + s3;
    const VecU t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = (s3 << 45) | (s3 >> 19);
    const VecD r = as_d((bits >> 12) | exponent_one) - 1.0;
    const VecU pick0 = (VecU)(r < p0);  // all ones where map 0 is chosen
    VecD m[kAffineParams];
    for (int k = 0; k < kAffineParams; ++k) m[k] = as_d((coef0[k] & pick0) | (coef1[k] & ~pick0));
    const VecD nx = ((m[0] * x + m[1] * y) + m[2] * z) + m[9];
    const VecD ny = ((m[3] * x + m[4] * y) + m[5] * z) + m[10];
    const VecD nz = ((m[6] * x + m[7] * y) + m[8] * z) + m[11];
    x = nx;
    y = ny;
    z = nz;
    ran_away |= (as_d(as_u(x) & abs_mask) > limit) | (as_d(as_u(y) & abs_mask) > limit) |
                (as_d(as_u(z) & abs_mask) > limit);
    for (int l = 0; l < kLanes; ++l) {
      double* p = out[l] + 3 * i;
      p[0] = x[l];
      p[1] = y[l];
      p[2] = z[l];
    }
  }
  for (int l = 0; l < kLanes; ++l) runaway[l] = ran_away[l] != 0;
}

}  // namespace scaffold::fractal
