// The size checks of every CARAML workload on any configuration its schema accepts: the text is
// loaded as an llm_training, an image_classification and an fno configuration (each refuses what
// is not its own), and every accepted one goes through its memory estimate and the budget check.
// The rules checked: every item is a finite or infinite byte count >= 0 (never NaN, never
// negative from an overflow), names at least one real key of the workload's schema, the total is
// at least its largest item, and the budget check passes with twice the total and refuses half
// of it with a core::Error that names the largest item's keys.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "core/memory_budget.hpp"
#include "fuzz_util.hpp"
#include "workloads/fno/memory_estimate.hpp"
#include "workloads/fno/options.hpp"
#include "workloads/image_classification/memory_estimate.hpp"
#include "workloads/image_classification/options.hpp"
#include "workloads/llm_training/memory_estimate.hpp"
#include "workloads/llm_training/options.hpp"

namespace {

using namespace scaffold;

template <class C>
void check_estimate(const core::MemoryEstimate& estimate) {
  if (estimate.items.empty()) std::abort();
  const core::MemoryItem* largest = &estimate.items.front();
  for (const core::MemoryItem& item : estimate.items) {
    if (std::isnan(item.bytes) || item.bytes < 0.0) std::abort();
    if (item.keys.empty()) std::abort();
    for (const std::string& key : item.keys)
      if (config::find_key<C>(key) == nullptr) std::abort();  // a key the user cannot find
    if (item.bytes > largest->bytes) largest = &item;
  }
  const double total = estimate.total_bytes();
  if (std::isnan(total) || total < largest->bytes) std::abort();
  if (std::isfinite(total)) {
    try {
      core::check_memory_budget("fuzz", estimate, 2.0 * total + 1.0, "cpu");
    } catch (const core::Error&) {
      std::abort();  // refused a budget it fits in
    }
  }
  if (total < 2.0) return;
  bool refused = false;
  try {
    core::check_memory_budget("fuzz", estimate, 0.5 * total, "cpu");
  } catch (const core::Error& e) {
    refused = std::string(e.what()).find(largest->keys.front()) != std::string::npos;
  }
  if (!refused) std::abort();  // let through a budget it cannot fit in, or did not name the key
}

template <class C, class Estimate>
void try_workload(const std::string& text, Estimate estimate) {
  C cfg;
  try {
    cfg = config::from_yaml_text<C>(text, "fuzz.yml");
  } catch (const core::Error&) {
    return;  // refused by the schema, with a message: not this target's business
  }
  try {
    check_estimate<C>(estimate(cfg));
  } catch (const core::Error&) {
    // an estimate may refuse a layout (e.g. a size that does not split), by name
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The layout the driver would pass, from the input's length: the estimate must hold for any.
  const int64_t split = 1 + static_cast<int64_t>(size % 8);
  try_workload<config::LlmTrainingConfig>(text, [split](const config::LlmTrainingConfig& c) {
    llm::LlmMemoryLayout layout;
    layout.tensor_parallel = split;
    layout.attention_keeps_scores = (split % 2) == 0;
    return llm::llm_memory_estimate(c, layout);
  });
  try_workload<config::ImageClassificationConfig>(
      text, [split](const config::ImageClassificationConfig& c) {
        const int64_t batch =
            c.global_batch_size % split == 0 ? c.global_batch_size / split : c.global_batch_size;
        return imgcls::imgcls_memory_estimate(c, batch);
      });
  try_workload<config::FnoConfig>(text, [split](const config::FnoConfig& c) {
    return fno::fno_memory_estimate(c, split, 1 + split % 3);
  });
  return 0;
}
