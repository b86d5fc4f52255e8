// SHA-256 (FIPS 180-4) through OpenSSL's EVP interface, for content hashes of shards, configs and
// checkpoints. Streaming: update() any number of times, then finish() once. Deliberately a thin
// wrapper, not a crypto library: no HMAC, no other digests; OpenSSL stays out of this header, so
// callers need neither its headers nor its link flags.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX (openssl/types.h); only held by pointer here

namespace scaffold::core {

class Sha256 {
 public:
  Sha256();
  // A copy continues from the same point independently (hash a common prefix once).
  Sha256(const Sha256& other);
  Sha256& operator=(const Sha256& other);
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;
  ~Sha256() = default;

  // Appends `size` bytes; may be called any number of times, with any split of the message.
  void update(const void* data, std::size_t size);
  void update(std::string_view text);

  // Returns the 32-byte digest and leaves the object finished. Call it once: calling update() or
  // finish() again afterwards, or using a moved-from object, is a bug and aborts (SCAFFOLD_CHECK).
  std::array<std::uint8_t, 32> finish();

 private:
  struct ContextDeleter {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, ContextDeleter> ctx_;
  bool finished_ = false;
};

// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace scaffold::core
