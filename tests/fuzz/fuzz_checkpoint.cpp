// The checkpoint envelope on any bytes: the header line, the length and the SHA-256 check. Every
// input is refused with a core::Error or accepted; an accepted one must be exactly what the
// writer makes of the archive it returns (one canonical form, so no two files pass for one), and
// the archive must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "train/checkpoint_envelope.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const train::OpenedEnvelope e = train::open_checkpoint_envelope(bytes, "fuzz.pt");
    if (e.archive.data() < bytes.data() ||
        e.archive.data() + e.archive.size() > bytes.data() + bytes.size())
      std::abort();
    if (!e.bare_archive && train::checkpoint_envelope(e.archive) != bytes) std::abort();
  } catch (const core::Error&) {
  }
  return 0;
}
