// SHA-256 (FIPS 180-4) in plain C++17, for content hashes of shards, configs and checkpoints.
// Streaming: update() any number of times, then finish() once. Deliberately not a general crypto
// library: no HMAC, no other digest sizes, no constant-time guarantees, no SIMD/SHA-NI paths.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace scaffold::core {

class Sha256 {
 public:
  Sha256();

  // Appends `size` bytes; may be called any number of times, with any split of the message.
  void update(const void* data, std::size_t size);
  void update(std::string_view text);

  // Pads, returns the 32-byte digest and leaves the object finished. Call it once: calling
  // update() or finish() again afterwards is a bug and aborts (SCAFFOLD_CHECK).
  std::array<std::uint8_t, 32> finish();

 private:
  void compress(const std::uint8_t* block);  // block: 64 bytes

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_;  // pending bytes of the current, incomplete block
  std::size_t buffer_bytes_ = 0;
  std::uint64_t total_bytes_ = 0;  // message length so far; FIPS pads with it in bits
  bool finished_ = false;
};

// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace scaffold::core
