// SHA-256 by OpenSSL's EVP digest interface (libcrypto): its implementation is the tested one and
// uses SHA-NI / AVX2 where the CPU has them, so hashing large shard files costs little. Every
// OpenSSL call is checked; a failure is an internal error (SHA-256 is available in every
// OpenSSL 1.1+/3.x build and provider configuration we run on), not a user error.
#include "core/sha256.hpp"

#include <openssl/evp.h>

#include "core/error.hpp"

namespace scaffold::core {
namespace {

// A fresh EVP context, initialised for SHA-256.
evp_md_ctx_st* new_sha256_context() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  SCAFFOLD_CHECK(ctx != nullptr, "EVP_MD_CTX_new failed (out of memory?)");
  if (EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    SCAFFOLD_CHECK(false, "EVP_DigestInit_ex(SHA-256) failed");
  }
  return ctx;
}

}  // namespace

void Sha256::ContextDeleter::operator()(evp_md_ctx_st* ctx) const {
  EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : ctx_(new_sha256_context()) {}

Sha256::Sha256(const Sha256& other) : finished_(other.finished_) {
  SCAFFOLD_CHECK(other.ctx_, "Sha256 copied after it was moved from");
  ctx_.reset(EVP_MD_CTX_new());
  SCAFFOLD_CHECK(ctx_ != nullptr, "EVP_MD_CTX_new failed (out of memory?)");
  SCAFFOLD_CHECK(EVP_MD_CTX_copy_ex(ctx_.get(), other.ctx_.get()) == 1,
                 "EVP_MD_CTX_copy_ex failed");
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other) *this = Sha256(other);
  return *this;
}

void Sha256::update(const void* data, std::size_t size) {
  SCAFFOLD_CHECK(ctx_, "Sha256::update called on a moved-from object");
  SCAFFOLD_CHECK(!finished_, "Sha256::update called after finish()");
  SCAFFOLD_CHECK(EVP_DigestUpdate(ctx_.get(), data, size) == 1, "EVP_DigestUpdate failed");
}

void Sha256::update(std::string_view text) {
  update(text.data(), text.size());
}

std::array<std::uint8_t, 32> Sha256::finish() {
  SCAFFOLD_CHECK(ctx_, "Sha256::finish called on a moved-from object");
  SCAFFOLD_CHECK(!finished_, "Sha256::finish called twice");
  finished_ = true;
  std::array<std::uint8_t, 32> digest{};
  unsigned int digest_bytes = 0;
  SCAFFOLD_CHECK(EVP_DigestFinal_ex(ctx_.get(), digest.data(), &digest_bytes) == 1 &&
                     digest_bytes == digest.size(),
                 "EVP_DigestFinal_ex failed");
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
