// Counter-style random streams: every stream is keyed by a tuple such as (seed, stream id,
// attempt), never by rank or thread, so results do not depend on how work is spread.
// Generator: xoshiro256+ seeded through SplitMix64; doubles take the top 52 bits.
// See docs/fractals.md, 'Determinism'. Not cryptographic and not numpy-compatible.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace scaffold::core {

// SplitMix64 finaliser: a bijective 64-bit mixer.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hashes an ordered tuple of keys into one 64-bit stream key.
inline uint64_t stream_key(std::initializer_list<uint64_t> keys) {
  uint64_t h = 0x243f6a8885a308d3ULL;  // digits of pi: any fixed non-zero start
  for (uint64_t k : keys) h = mix64(h ^ mix64(k + 0x9e3779b97f4a7c15ULL));
  return h;
}

// Maps 64 random bits to a double in [0, 1) with 52 random mantissa bits. Written with integer
// operations only so a vectorised kernel can reproduce it lane by lane.
inline double bits_to_unit_double(uint64_t x) {
  const uint64_t bits = (x >> 12) | 0x3ff0000000000000ULL;  // a double in [1, 2)
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d - 1.0;
}

class Xoshiro256p {
 public:
  explicit Xoshiro256p(uint64_t key) {
    uint64_t sm = key;
    for (auto& word : s_) {
      sm += 0x9e3779b97f4a7c15ULL;
      word = mix64(sm);
    }
  }
  uint64_t next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }
  double uniform01() { return bits_to_unit_double(next()); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  // Unbiased integer in [0, bound): rejection sampling on the top bits, which are xoshiro256+'s
  // strongest (its lowest bits are weakly random). Fewer than two draws on average.
  uint64_t below(uint64_t bound) {
    if (bound <= 1) return 0;
    int bits = 0;
    for (uint64_t v = bound - 1; v != 0; v >>= 1) ++bits;
    for (;;) {
      const uint64_t r = next() >> (64 - bits);
      if (r < bound) return r;
    }
  }
  const uint64_t* state() const { return s_; }

 private:
  uint64_t s_[4];
};

}  // namespace scaffold::core
