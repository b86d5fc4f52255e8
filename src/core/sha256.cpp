// SHA-256 compression and padding as written in FIPS 180-4 section 6.2, big-endian throughout.
// The reference formulation only: one block at a time, no unrolling or intrinsics, since hashing
// is never on a timed path here. Bytes are assembled by shifts, so host endianness does not matter.
#include "core/sha256.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace scaffold::core {
namespace {

// First 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 4.2.2).
constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// First 32 bits of the fractional parts of the square roots of the first 8 primes (FIPS 5.3.3).
constexpr std::array<std::uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

}  // namespace

Sha256::Sha256() : state_(kInitialState), buffer_{} {}

void Sha256::compress(const std::uint8_t* block) {
  std::uint32_t w[64];
  for (int t = 0; t < 16; ++t) {
    w[t] = (std::uint32_t{block[4 * t]} << 24) | (std::uint32_t{block[4 * t + 1]} << 16) |
           (std::uint32_t{block[4 * t + 2]} << 8) | std::uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }

  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const std::uint32_t big_sigma1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const std::uint32_t choose = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + big_sigma1 + choose + kRoundConstants[t] + w[t];
    const std::uint32_t big_sigma0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = big_sigma0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, std::size_t size) {
  SCAFFOLD_CHECK(!finished_, "Sha256::update called after finish()");
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  total_bytes_ += size;
  // Top up a partial block first, then hash whole blocks straight from the input.
  if (buffer_bytes_ > 0) {
    const std::size_t take = std::min(size, buffer_.size() - buffer_bytes_);
    std::memcpy(buffer_.data() + buffer_bytes_, bytes, take);
    buffer_bytes_ += take;
    bytes += take;
    size -= take;
    if (buffer_bytes_ < buffer_.size()) return;
    compress(buffer_.data());
    buffer_bytes_ = 0;
  }
  for (; size >= 64; bytes += 64, size -= 64) compress(bytes);
  if (size > 0) {
    std::memcpy(buffer_.data(), bytes, size);
    buffer_bytes_ = size;
  }
}

void Sha256::update(std::string_view text) {
  update(text.data(), text.size());
}

std::array<std::uint8_t, 32> Sha256::finish() {
  SCAFFOLD_CHECK(!finished_, "Sha256::finish called twice");
  // Padding: 0x80, zeros up to 56 mod 64, then the bit length as 64-bit big-endian. Past 55
  // pending bytes the length no longer fits, so the padding spills into one extra block.
  const std::uint64_t total_bits = total_bytes_ * 8;
  std::uint8_t padding[72] = {0x80};
  const std::size_t pad_bytes = buffer_bytes_ < 56 ? 56 - buffer_bytes_ : 120 - buffer_bytes_;
  for (int i = 0; i < 8; ++i) {
    padding[pad_bytes + i] = static_cast<std::uint8_t>(total_bits >> (56 - 8 * i));
  }
  update(padding, pad_bytes + 8);
  finished_ = true;

  std::array<std::uint8_t, 32> digest{};
  for (int i = 0; i < 8; ++i) {
    digest[4 * i] = static_cast<std::uint8_t>(state_[i] >> 24);
    digest[4 * i + 1] = static_cast<std::uint8_t>(state_[i] >> 16);
    digest[4 * i + 2] = static_cast<std::uint8_t>(state_[i] >> 8);
    digest[4 * i + 3] = static_cast<std::uint8_t>(state_[i]);
  }
  return digest;
}

std::string sha256_hex(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  const std::array<std::uint8_t, 32> digest = hasher.finish();
  constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (const std::uint8_t byte : digest) {
    hex += kHexDigits[byte >> 4];
    hex += kHexDigits[byte & 0x0f];
  }
  return hex;
}

}  // namespace scaffold::core
