// Choosing and opening power sources by method name: "auto" opens whatever is present, an
// explicit list must all be present. The only place that knows every backend. jpwr's method
// names are accepted too: pynvml (our nvml), rocm, gh (the GH200 hwmon meters alone); its gc
// (Graphcore IPUs) is refused with the reason.
#pragma once

#include <string>
#include <vector>

#include "energy/gpu.hpp"
#include "energy/sensor.hpp"
#include "energy/sysfs.hpp"

namespace scaffold::energy {

enum class Method { Nvml, Rocm, Hwmon, Gh, Rapl };
const char* method_name(Method method);  // "nvml", "rocm", "hwmon", "gh", "rapl"

// The values of --methods: each value one name or a comma-separated list (ours: "nvml,rapl";
// jpwr's: several values, "pynvml" "gh"; both mixed). "auto" (alone) -> {} (every method, those
// present); otherwise the methods in order, duplicates dropped, and gh dropped when hwmon is
// there too (hwmon reads every sensor gh reads: both would count the GH200 meters twice).
// Throws core::UsageError naming the bad entry and the valid choices; for gc, why it is refused.
std::vector<Method> parse_methods(const std::vector<std::string>& values);
std::vector<Method> parse_methods(const std::string& text);  // one value

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
