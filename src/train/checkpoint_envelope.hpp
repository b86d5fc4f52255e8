// The checkpoint file's envelope, torch-free so it can be fuzzed on its own: one header line
// "scaffold-checkpoint sha256=<64 lowercase hex> bytes=<n>\n" (n in canonical decimal: no sign,
// no leading zeros) followed by exactly n bytes of LibTorch archive whose SHA-256 the header
// records. A LibTorch archive is a zip whose reader tolerates some damage (a flipped byte in
// stored tensor data is not seen at all), so the digest is the only check that the weights are
// the ones written. The archive itself is parsed by LibTorch (train/checkpoint.cpp).
#pragma once

#include <string>
#include <string_view>

namespace scaffold::train {

// The header line and the archive, as the checkpoint writer stores them.
std::string checkpoint_envelope(std::string_view archive);

struct OpenedEnvelope {
  bool bare_archive =
      false;  // no header: the bytes start as a zip (an older scaffold's or a foreign file)
  std::string_view archive;  // the archive inside `bytes` (all of it when bare_archive)
};

// Checks the header, the length and the digest of `bytes` (read from `source`, named in errors)
// and returns the archive in place. Throws core::FileError naming the source and what is wrong:
// no header line, a damaged one, a truncated or extended archive, or a digest mismatch. A bare
// zip is returned as bare_archive for the caller to tell an older scaffold's file from damage.
OpenedEnvelope open_checkpoint_envelope(std::string_view bytes, const std::string& source);

}  // namespace scaffold::train
