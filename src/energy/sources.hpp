// Choosing and opening power sources by method name: "auto" opens whatever is present, an
// explicit list must all be present. The only place that knows every backend.
#pragma once

#include <string>
#include <vector>

#include "energy/gpu.hpp"
#include "energy/sensor.hpp"
#include "energy/sysfs.hpp"

namespace scaffold::energy {

enum class Method { Nvml, Rocm, Hwmon, Rapl };
const char* method_name(Method method);  // "nvml", "rocm", "hwmon", "rapl"

// "auto" -> {} (every method, those present); "nvml,rapl" -> those, in order, duplicates
// dropped. Throws core::UsageError naming the bad entry and the valid choices.
std::vector<Method> parse_methods(const std::string& text);

struct SourceOptions {
  std::vector<Method> methods;  // empty: auto
  NvmlOptions nvml;
  RocmSmiOptions rocm;
  HwmonOptions hwmon;
  PowercapOptions powercap;
};

struct OpenedSources {
  std::vector<OpenSource> sources;  // in method order: nvml, rocm, hwmon, rapl (or as listed)
  std::vector<std::string> absent;  // auto only: "<method>: why", for one message when empty
};

// Opens the sources. With auto, absent ones are skipped (their reasons kept in `absent`);
// an explicitly requested method that is absent throws core::Error naming the method and
// what was looked for.
OpenedSources open_sources(const SourceOptions& options);

}  // namespace scaffold::energy
