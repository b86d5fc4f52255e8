// Method names and open_sources: auto-detection and explicit selection of power sources.
#include "energy/sources.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.hpp"

namespace scaffold::energy {

namespace {

constexpr Method kAllMethods[] = {Method::Nvml, Method::Rocm, Method::Hwmon, Method::Rapl};

std::unique_ptr<PowerSource> make_source(Method method, const SourceOptions& o) {
  switch (method) {
    case Method::Nvml:
      return make_nvml_source(o.nvml);
    case Method::Rocm:
      return make_rocm_smi_source(o.rocm);
    case Method::Hwmon:
      return make_hwmon_source(o.hwmon);
    case Method::Rapl:
      return make_powercap_source(o.powercap);
  }
  return nullptr;
}

}  // namespace

const char* method_name(Method method) {
  switch (method) {
    case Method::Nvml:
      return "nvml";
    case Method::Rocm:
      return "rocm";
    case Method::Hwmon:
      return "hwmon";
    case Method::Rapl:
      return "rapl";
  }
  return "?";
}

std::vector<Method> parse_methods(const std::string& text) {
  if (text == "auto") return {};
  std::vector<Method> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    bool known = false;
    for (Method m : kAllMethods) {
      if (item == method_name(m)) {
        known = true;
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
      }
    }
    if (!known)
      throw core::UsageError(
          fmt::format("--methods: unknown power method '{}' in '{}' (available: auto, or a "
                      "comma-separated list "
                      "of nvml, rocm, hwmon, rapl)",
                      item, text));
    begin = end + 1;
  }
  return out;
}

OpenedSources open_sources(const SourceOptions& options) {
  OpenedSources out;
  const bool auto_detect = options.methods.empty();
  const std::vector<Method> methods =
      auto_detect ? std::vector<Method>(std::begin(kAllMethods), std::end(kAllMethods))
                  : options.methods;
  for (Method m : methods) {
    try {
      out.sources.push_back(open_source(make_source(m, options)));
      LOG_DEBUG("power method {}: {} sensors", method_name(m), out.sources.back().sensors.size());
    } catch (const SourceUnavailable& e) {
      if (!auto_detect)
        throw core::Error(std::string("power method '") + method_name(m) +
                          "' is not available: " + e.what());
      LOG_DEBUG("power method {} absent: {}", method_name(m), e.what());
      out.absent.push_back(std::string(method_name(m)) + ": " + e.what());
    }
  }
  return out;
}

}  // namespace scaffold::energy
