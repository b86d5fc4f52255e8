// The sensor helpers shared by every source: kind names, open_source, the total rule.
#include "energy/sensor.hpp"

#include <map>

namespace scaffold::energy {

const char* sensor_kind_name(SensorKind kind) {
  switch (kind) {
    case SensorKind::Module:
      return "module";
    case SensorKind::Accelerator:
      return "accelerator";
    case SensorKind::CpuPackage:
      return "cpu_package";
    case SensorKind::Part:
      return "part";
    case SensorKind::Other:
      return "other";
  }
  return "other";
}

OpenSource open_source(std::unique_ptr<PowerSource> source) {
  OpenSource out;
  out.sensors = source->init();
  out.source = std::move(source);
  return out;
}

void select_total(std::vector<SensorInfo>& sensors) {
  bool any_module = false;
  for (const auto& s : sensors) any_module = any_module || s.kind == SensorKind::Module;
  for (auto& s : sensors) {
    if (any_module)
      s.in_total = s.kind == SensorKind::Module;
    else
      s.in_total = s.kind == SensorKind::Accelerator || s.kind == SensorKind::CpuPackage;
  }
}

void make_names_unique(std::vector<SensorInfo>& sensors) {
  std::map<std::string, int> seen;
  for (auto& s : sensors) {
    const int n = ++seen[s.name];
    if (n > 1) s.name += " #" + std::to_string(n);
  }
}

}  // namespace scaffold::energy
