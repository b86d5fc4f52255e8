// train_stats.csv on any text: the reader (every row validated) and a resume at an epoch taken
// from the input's first byte. A history that reads must hold epochs 1..n in order.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "report/train_stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  if (size == 0) return 0;
  const auto dir = fuzz::scratch();
  const auto path = dir / report::kTrainStatsFileName;
  fuzz::write_bytes(path, data + 1, size - 1);
  try {
    const std::vector<report::EpochRecord> rows = report::read_train_stats(path);
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i].epoch != static_cast<int64_t>(i) + 1) std::abort();
  } catch (const core::Error&) {
  }
  try {
    (void)report::TrainStatsCsv::open_resume(dir, 1 + data[0] % 8);
  } catch (const core::Error&) {
  }
  return 0;
}
