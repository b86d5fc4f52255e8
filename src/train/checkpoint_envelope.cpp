#include "train/checkpoint_envelope.hpp"

#include <fmt/format.h>

#include <cstddef>

#include "core/error.hpp"
#include "core/sha256.hpp"

namespace scaffold::train {
namespace {

constexpr std::string_view kMagic = "scaffold-checkpoint sha256=";
constexpr std::string_view kBytesTag = " bytes=";
constexpr std::size_t kHexDigits = 64;
constexpr std::size_t kMaxLengthDigits = 16;  // < 10^16 bytes: no overflow, and far beyond any disk

bool lower_hex(std::string_view s) {
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string checkpoint_envelope(std::string_view archive) {
  std::string out;
  out.reserve(kMagic.size() + kHexDigits + kBytesTag.size() + 21 + archive.size());
  out.append(kMagic);
  out.append(core::sha256_hex(archive));
  out.append(kBytesTag);
  out.append(std::to_string(archive.size()));
  out.push_back('\n');
  out.append(archive);
  return out;
}

OpenedEnvelope open_checkpoint_envelope(std::string_view bytes, const std::string& source) {
  if (bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4)) return {true, bytes};
  if (bytes.substr(0, kMagic.size()) != kMagic)
    throw core::FileError(source,
                          "not a scaffold checkpoint (no 'scaffold-checkpoint' header line; "
                          "written by another program or damaged at its start)");
  const std::size_t eol = bytes.find('\n');
  const std::size_t hex_at = kMagic.size(), tag_at = hex_at + kHexDigits,
                    digits_at = tag_at + kBytesTag.size();
  if (eol == std::string_view::npos || eol <= digits_at ||
      bytes.substr(tag_at, kBytesTag.size()) != kBytesTag)
    throw core::FileError(source, "damaged checkpoint header line");
  const std::string_view digest = bytes.substr(hex_at, kHexDigits);
  const std::string_view digits = bytes.substr(digits_at, eol - digits_at);
  if (!lower_hex(digest) || digits.size() > kMaxLengthDigits ||
      (digits.size() > 1 && digits[0] == '0'))
    throw core::FileError(source, "damaged checkpoint header line");
  std::size_t length = 0;
  for (const char ch : digits) {
    if (ch < '0' || ch > '9') throw core::FileError(source, "damaged checkpoint header line");
    length = length * 10 + static_cast<std::size_t>(ch - '0');
  }
  const std::string_view archive = bytes.substr(eol + 1);
  if (archive.size() != length)
    throw core::FileError(
        source, fmt::format("truncated or extended checkpoint: {} bytes after the header, the "
                            "header says {}",
                            archive.size(), length));
  const std::string actual = core::sha256_hex(archive);
  if (actual != digest)
    throw core::FileError(source,
                          fmt::format("checkpoint fails its SHA-256 check (damaged on disk or in "
                                      "transfer): recorded {}, content {}",
                                      digest, actual));
  return {false, archive};
}

}  // namespace scaffold::train
