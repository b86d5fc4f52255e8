// The OpenSSL-backed Sha256 against independent reference digests: the FIPS 180-2 / NIST CSRC
// examples (empty, "abc", the 448-bit two-block message, one million 'a' streamed in uneven
// pieces), the padding boundaries (55/56/64 bytes pending) against Python's hashlib, streamed-in-
// pieces versus hashed at once, and copies that continue independently. Not a test of speed or of
// misuse (finish twice aborts; death tests are not used).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "core/sha256.hpp"

namespace scaffold::core {
namespace {

std::string to_hex(const std::array<std::uint8_t, 32>& digest) {
  constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  for (const std::uint8_t byte : digest) {
    hex += kHexDigits[byte >> 4];
    hex += kHexDigits[byte & 0x0f];
  }
  return hex;
}

// A message that is not all one byte, so a misplaced or dropped byte changes the digest.
std::string patterned_message(std::size_t size) {
  std::string message(size, '\0');
  for (std::size_t i = 0; i < size; ++i) message[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return message;
}

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage448Bits) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Message896Bits) {
  // FIPS 180-2's SHA-384/512 example message; its SHA-256 is the value in the common SHA-2 test
  // vector tables, cross-checked with hashlib.sha256(...).hexdigest().
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjkl"
                       "mnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, OneMillionAInUnevenChunks) {
  constexpr std::size_t kTotalBytes = 1000000;
  const std::string chunk_source(200, 'a');
  const std::size_t chunk_sizes[] = {1, 63, 64, 65, 55, 56, 57, 127, 128, 129, 0, 200, 3};
  Sha256 hasher;
  std::size_t fed_bytes = 0;
  for (std::size_t i = 0; fed_bytes < kTotalBytes; ++i) {
    const std::size_t size =
        std::min(chunk_sizes[i % std::size(chunk_sizes)], kTotalBytes - fed_bytes);
    hasher.update(chunk_source.data(), size);
    fed_bytes += size;
  }
  EXPECT_EQ(to_hex(hasher.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(std::string(kTotalBytes, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundariesMatchHashlib) {
  // Expected: hashlib.sha256(b'a' * n).hexdigest() from CPython 3.
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
      {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"}};
  for (const auto& [size, expected] : cases) {
    EXPECT_EQ(sha256_hex(std::string(size, 'a')), expected) << "length " << size;
  }
}

TEST(Sha256, PiecewiseEqualsWhole) {
  // Every length 0..200 covers 55/56/64 pending bytes in the first, second and third block; every
  // two-way split point and a byte-at-a-time feed cover every buffer fill state in update().
  for (std::size_t size = 0; size <= 200; ++size) {
    const std::string message = patterned_message(size);
    const std::string whole = sha256_hex(message);

    for (std::size_t split = 0; split <= size; ++split) {
      Sha256 hasher;
      hasher.update(message.data(), split);
      hasher.update(message.data() + split, size - split);
      ASSERT_EQ(to_hex(hasher.finish()), whole) << "length " << size << ", split at " << split;
    }

    Sha256 bytewise;
    for (const char byte : message) bytewise.update(&byte, 1);
    ASSERT_EQ(to_hex(bytewise.finish()), whole) << "length " << size << ", byte at a time";

    Sha256 via_view;
    via_view.update(std::string_view(message));
    ASSERT_EQ(to_hex(via_view.finish()), whole) << "length " << size << ", string_view overload";
  }
}

TEST(Sha256, CopyContinuesIndependently) {
  // "abc" and the 448-bit message share the prefix "ab": hashed once, copied, each copy finishes
  // one message, and both must give the NIST digests. sha256("a") is from hashlib.
  Sha256 prefix;
  prefix.update("ab");
  Sha256 copy = prefix;
  prefix.update("c");
  copy.update("cdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(to_hex(prefix.finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(copy.finish()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

  Sha256 assigned;
  assigned.update("unrelated bytes, replaced by the assignment");
  Sha256 source;
  source.update("a");
  assigned = source;
  assigned.update("bc");
  EXPECT_EQ(to_hex(assigned.finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(source.finish()),
            "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");
}

}  // namespace
}  // namespace scaffold::core
