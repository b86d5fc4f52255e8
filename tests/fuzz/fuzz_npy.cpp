// The .npy reader on any file: the header parser (as numpy.load parses it), the size check and
// the read of every dtype it serves.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/npy.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  const auto path = fuzz::scratch() / "input.npy";
  fuzz::write_bytes(path, data, size);
  try {
    const core::NpyInfo info = core::read_npy_info(path);
    std::vector<int64_t> shape;
    switch (info.dtype) {
      case core::DType::Float32:
        (void)core::read_npy<float>(path, &shape);
        break;
      case core::DType::Float64:
        (void)core::read_npy<double>(path, &shape);
        break;
      case core::DType::UInt16:
        (void)core::read_npy<uint16_t>(path, &shape);
        break;
      case core::DType::Int64:
        (void)core::read_npy<int64_t>(path, &shape);
        break;
      default:
        break;
    }
  } catch (const core::Error&) {
  }
  return 0;
}
