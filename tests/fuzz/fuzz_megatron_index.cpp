// Megatron's indexed dataset (.idx + .bin) on any bytes: the first two input bytes give the .bin
// size (0 .. 65535 bytes of zeros), the rest is the .idx. Opening checks the whole index; an
// opened dataset must then read every one of its sequences (up to 4096) without leaving the
// .bin, and its document index must be what the open promised (starts at 0, ends at N).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  if (size < 2) return 0;
  const std::size_t bin_bytes =
      static_cast<std::size_t>(data[0]) | (static_cast<std::size_t>(data[1]) << 8);
  const auto prefix = fuzz::scratch() / "input";
  fuzz::write_bytes(llm::index_file_path(prefix), data + 2, size - 2);
  const std::vector<uint8_t> zeros(bin_bytes, 0);
  fuzz::write_bytes(llm::data_file_path(prefix), zeros.data(), zeros.size());
  try {
    const llm::IndexedDataset ds(prefix);
    const std::size_t n = ds.num_sequences();
    if (ds.document_index(0) != 0 ||
        ds.document_index(ds.num_documents()) != static_cast<int64_t>(n))
      std::abort();
    for (std::size_t i = 0; i < n && i < 4096; ++i) {
      const std::vector<int64_t> tokens = ds.sequence(i);
      if (static_cast<int64_t>(tokens.size()) != ds.sequence_length(i)) std::abort();
      for (const int64_t t : tokens)
        if (t != 0) std::abort();  // the .bin is all zeros: anything else was read from outside it
    }
  } catch (const core::Error&) {
  }
  return 0;
}
