// The workloads' per-step CSVs on any text: the first byte picks the reader (image
// classification's or the FNO's epoch_stats.csv, LLM training's iteration_stats.csv), the rest is
// the file. A file that reads must keep the rules the reader promises: epochs that follow each
// other, log intervals that add up, finite non-negative times and non-negative counts.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "workloads/fno/metrics.hpp"
#include "workloads/image_classification/metrics.hpp"
#include "workloads/llm_training/metrics.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool time_ok(double s) {
  return std::isfinite(s) && s >= 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  if (size == 0) return 0;
  const auto path = fuzz::scratch() / "step_stats.csv";
  fuzz::write_bytes(path, data + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const std::vector<imgcls::EpochRow> rows = imgcls::read_epoch_stats(path);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const imgcls::EpochRow& r = rows[i];
          require(r.epoch >= 1 && (i == 0 || r.epoch == rows[i - 1].epoch + 1));
          require(time_ok(r.duration_s) && time_ok(r.train_s) && time_ok(r.validation_s));
          require(time_ok(r.lr) && time_ok(r.median_step_s));
          require(r.train_images >= 0 && r.val_images >= 0);
          require(std::isnan(r.val_top1) || (r.val_top1 >= 0 && r.val_top1 <= 1));
        }
        break;
      }
      case 1: {
        const std::vector<llm::IntervalRow> rows = llm::read_iteration_stats(path);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const llm::IntervalRow& r = rows[i];
          require(r.iterations >= 1 && r.iteration >= r.iterations);
          require(i == 0 || r.iteration == rows[i - 1].iteration + r.iterations);
          require(time_ok(r.train_s) && time_ok(r.lr) && time_ok(r.time_per_iteration_s()));
          require(r.skipped >= 0 && r.skipped <= r.iterations);
          require(std::isfinite(r.loss_scale) && r.loss_scale > 0);
        }
        break;
      }
      default: {
        const std::vector<fno::EpochRow> rows = fno::read_epoch_stats(path);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const fno::EpochRow& r = rows[i];
          require(r.epoch >= 1 && (i == 0 || r.epoch == rows[i - 1].epoch + 1));
          for (double s : {r.duration_s, r.train_s, r.validation_s, r.monitor_s, r.checkpoint_s})
            require(time_ok(s));
          require(r.train_samples >= 0 && r.val_samples >= 0);
          require(!(r.val_rel_l2 < 0));
        }
      }
    }
  } catch (const core::Error&) {
  }
  return 0;
}
