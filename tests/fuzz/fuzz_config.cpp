// The config loader on any text: the strict libyaml pass, yaml-cpp, then the schema's checks. A
// config that loads must write back (to_yaml) and load again to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/load.hpp"
#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "workloads/image_classification/options.hpp"
#include "workloads/scaffold/schema.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const config::Config c = config::config_from_yaml_text(text, "fuzz.yml");
    const std::string yaml = config::to_yaml(c);
    if (config::to_yaml(config::config_from_yaml_text(yaml, "round-trip")) != yaml) std::abort();
  } catch (const core::Error&) {
  }
  try {
    (void)config::from_yaml_text<config::ImageClassificationConfig>(text, "fuzz.yml");
  } catch (const core::Error&) {
  }
  return 0;
}
