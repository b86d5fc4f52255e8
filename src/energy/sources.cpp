// Method names and open_sources: auto-detection and explicit selection of power sources.
#include "energy/sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/log.hpp"

namespace scaffold::energy {

namespace {

// auto's order; Gh is not in it (Hwmon reads every sensor Gh would).
constexpr Method kAllMethods[] = {Method::Nvml, Method::Rocm, Method::Hwmon, Method::Rapl};
constexpr Method kNamedMethods[] = {Method::Nvml, Method::Rocm, Method::Hwmon, Method::Gh,
                                    Method::Rapl};

// A name of ours or jpwr's; nullopt when unknown. Throws for jpwr's gc.
std::optional<Method> method_from_name(const std::string& name) {
  for (Method m : kNamedMethods)
    if (name == method_name(m)) return m;
  if (name == "pynvml") return Method::Nvml;
  if (name == "gc")
    throw core::UsageError(
        "--methods: jpwr's method 'gc' (Graphcore IPU power through the Poplar SDK's gcipuinfo) "
        "is not supported: scaffold runs no workload on IPUs and has no Poplar backend; measure "
        "IPU systems with jpwr itself");
  return std::nullopt;
}

std::unique_ptr<PowerSource> make_source(Method method, const SourceOptions& o) {
  switch (method) {
    case Method::Nvml:
      return make_nvml_source(o.nvml);
    case Method::Rocm:
      return make_rocm_smi_source(o.rocm);
    case Method::Hwmon:
      return make_hwmon_source(o.hwmon);
    case Method::Gh: {
      HwmonOptions gh = o.hwmon;
      gh.gh200_only = true;
      return make_hwmon_source(gh);
    }
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
    case Method::Gh:
      return "gh";
    case Method::Rapl:
      return "rapl";
  }
  return "?";
}

std::vector<Method> parse_methods(const std::vector<std::string>& values) {
  std::string all;  // the values as given, for messages
  for (const auto& v : values) all += (all.empty() ? "" : " ") + v;
  if (values.size() == 1 && values.front() == "auto") return {};
  std::vector<Method> out;
  for (const auto& text : values) {
    std::size_t begin = 0;
    while (begin <= text.size()) {
      const std::size_t end = std::min(text.find(',', begin), text.size());
      const std::string item = text.substr(begin, end - begin);
      begin = end + 1;
      if (item == "auto")
        throw core::UsageError(
            fmt::format("--methods: 'auto' cannot be combined with other methods (got '{}')", all));
      const std::optional<Method> m = method_from_name(item);
      if (!m)
        throw core::UsageError(fmt::format(
            "--methods: unknown power method '{}' in '{}' (available: auto, or one or more of "
            "nvml, rocm, hwmon, rapl and jpwr's pynvml (= nvml) and gh (the GH200 hwmon meters "
            "alone), as separate values or a comma-separated list; put -- between the methods "
            "and the command)",
            item, all));
      if (std::find(out.begin(), out.end(), *m) == out.end()) out.push_back(*m);
    }
  }
  const bool hwmon = std::find(out.begin(), out.end(), Method::Hwmon) != out.end();
  if (hwmon) out.erase(std::remove(out.begin(), out.end(), Method::Gh), out.end());
  return out;
}

std::vector<Method> parse_methods(const std::string& text) {
  return parse_methods(std::vector<std::string>{text});
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
