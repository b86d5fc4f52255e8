// Power sources read from Linux sysfs: hwmon power sensors (GH200 superchips' ACPI power meters
// with power1_oem_info labels, and any other powerN_input/_average) and powercap/RAPL energy
// counters. Each takes its root directory, so tests point it at fixture trees.
#pragma once

#include <filesystem>
#include <memory>

#include "energy/sensor.hpp"

namespace scaffold::energy {

struct HwmonOptions {
  std::filesystem::path root = "/sys/class/hwmon";
  // jpwr's `gh` method: only the GH200 power meters (sensors with a powerK_oem_info label),
  // reported with method "gh"; without any, the source is unavailable.
  bool gh200_only = false;
};

// One sensor per hwmonN/powerK (also looked for in hwmonN/device/, where GH200 kernels put
// them): powerK_input (instant) when present, else powerK_average, in µW. The label is
// powerK_label or powerK_oem_info. GH200 labels set the kind: "Module Power Socket N" is the
// whole superchip (Module), "Grace Power Socket N" the CPU and its memory (CpuPackage), "CPU
// Power"/"SysIO Power" parts of those (Part); anything else is Other. Names: "hwmon:<oem label>"
// for GH200, else "hwmon:<hwmon name>/<label or powerK>"; jpwr's name "gh:<oem label>" for GH200
// sensors. Devices in numeric order (hwmon2 < hwmon10).
std::unique_ptr<PowerSource> make_hwmon_source(const HwmonOptions& options = {});

struct PowercapOptions {
  std::filesystem::path root = "/sys/class/powercap";
};

// One sensor per RAPL domain intel-rapl:N (name package-N, psys) and sub-domain intel-rapl:N:M
// (core, uncore, dram), read from energy_uj, which wraps at max_energy_range_uj. Power is the
// counter's mean over each interval. Only package domains are CpuPackage (summed); psys is Other
// and sub-domains are Part. intel-rapl-mmio duplicates package-N and is skipped.
// Names: "rapl:package-0", "rapl:package-0/dram".
std::unique_ptr<PowerSource> make_powercap_source(const PowercapOptions& options = {});

}  // namespace scaffold::energy
