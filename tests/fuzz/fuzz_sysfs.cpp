// The hwmon and powercap (RAPL) parsers on any attribute text: the input is cut at '|' into the
// files of one hwmon device and one RAPL domain (names, labels, readings, counter range), then
// both sources are initialised and sampled twice.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "energy/sysfs.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace scaffold;
  namespace fs = std::filesystem;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t bar; (bar = text.find('|', start)) != std::string::npos; start = bar + 1)
    parts.push_back(text.substr(start, bar - start));
  parts.push_back(text.substr(start));
  parts.resize(8);
  const fs::path root = fuzz::scratch() / "sys";
  std::error_code ec;
  fs::remove_all(root, ec);
  const fs::path hw = root / "hwmon" / "hwmon3", rapl = root / "powercap" / "intel-rapl:0";
  fs::create_directories(hw);
  fs::create_directories(rapl);
  const std::pair<fs::path, const std::string&> files[] = {{hw / "name", parts[0]},
                                                           {hw / "power1_input", parts[1]},
                                                           {hw / "power1_label", parts[2]},
                                                           {hw / "power1_oem_info", parts[3]},
                                                           {rapl / "name", parts[4]},
                                                           {rapl / "energy_uj", parts[5]},
                                                           {rapl / "max_energy_range_uj", parts[6]},
                                                           {hw / "power2_input", parts[7]}};
  for (const auto& [path, content] : files) std::ofstream(path, std::ios::binary) << content;
  auto exercise = [](std::unique_ptr<energy::PowerSource> source) {
    try {
      const std::vector<energy::SensorInfo> sensors = source->init();
      std::vector<energy::SensorReading> out(sensors.size());
      source->sample(out);
      source->sample(out);
      source->finalize();
    } catch (const core::Error&) {
    }
  };
  exercise(energy::make_hwmon_source(energy::HwmonOptions{root / "hwmon"}));
  exercise(energy::make_powercap_source(energy::PowercapOptions{root / "powercap"}));
  return 0;
}
