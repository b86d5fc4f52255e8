// What every power source shares: the description of one sensor, one reading, the small
// init/sample/finalize interface, and the rule that picks which sensors a total sums (each
// physical consumer once). No sampling, timing or files here: see trace.hpp and sampler.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace scaffold::energy {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kJoulesPerWh = 3600.0;
inline double wh_from_j(double energy_j) {
  return energy_j / kJoulesPerWh;
}

// What a sensor measures, which decides whether a total may add it (select_total).
enum class SensorKind {
  Module,       // a whole superchip including its GPU (GH200 "Module Power Socket N")
  Accelerator,  // one GPU or GCD (NVML, ROCm SMI)
  CpuPackage,   // one CPU socket (RAPL package-N; GH200 "Grace Power Socket N": CPU + LPDDR)
  Part,         // a part of another sensor (RAPL core/uncore/dram, GH200 CPU/SysIO): never summed
  Other,        // meaning unknown (generic hwmon, RAPL psys): reported, never summed
};
const char* sensor_kind_name(SensorKind kind);  // "module", "accelerator", ...

struct SensorInfo {
  std::string name;    // unique column name "<method>:<device or label>", e.g. "nvml:0"
  std::string source;  // the method that reads it: nvml, rocm, hwmon, gh, rapl (or a test fake)
  // The column jpwr gives the same sensor ("pynvml:0", "rocm:0", "gh:Module Power Socket 0"),
  // for the files of `scaffold power --df-out`; "" where jpwr has no such sensor (RAPL, generic
  // hwmon), and those files use `name`.
  std::string jpwr_name;
  std::string unit = "W";
  std::string detail;  // where it comes from (device name, sysfs path, API used)
  SensorKind kind = SensorKind::Other;
  bool has_counter = false;         // a hardware energy counter is read with every sample
  bool power_from_counter = false;  // no power reading: power is the counter's mean over each
                                    // sampling interval (RAPL), so integrated == counter energy
  double counter_range_j = 0.0;     // the counter wraps modulo this many joules; 0 = never
  bool in_total = false;            // summed in totals (set by select_total)
  // Run-time state, filled in by the trace: a sensor that fails is marked, never fatal.
  bool failed = false;         // at least one read failed (power or counter)
  int64_t failed_reads = 0;    // samples in which a read failed
  bool counter_reset = false;  // the counter went backwards with no known range: not used
};

// One sample of one sensor. NaN = not read (failed, or not provided by this sensor).
struct SensorReading {
  double power_w = kNaN;
  double counter_j = kNaN;  // the raw counter as the hardware reports it, in joules (may wrap)
};

// Thrown by PowerSource::init when the source has nothing to measure on this machine; names
// what was looked for (library, directory) and why it did not qualify.
class SourceUnavailable : public core::Error {
 public:
  explicit SourceUnavailable(const std::string& what) : core::Error(what) {}
};

// A backend (jpwr's "method"). Not thread-safe: the sampler serialises every call.
class PowerSource {
 public:
  virtual ~PowerSource() = default;
  virtual std::string method() const = 0;
  // Finds the sensors, once, before any sample. Throws SourceUnavailable when there are none.
  virtual std::vector<SensorInfo> init() = 0;
  // Reads every sensor from init(), in the same order, into `out` (sized by the caller and
  // filled with NaN). A read that fails leaves NaN; throwing marks the whole sample failed.
  virtual void sample(std::vector<SensorReading>& out) = 0;
  // Releases libraries and handles. Called once, after the last sample.
  virtual void finalize() {}
};

// A source together with the sensors its init() found.
struct OpenSource {
  std::unique_ptr<PowerSource> source;
  std::vector<SensorInfo> sensors;
};
// Calls init() and keeps the result; lets SourceUnavailable through.
OpenSource open_source(std::unique_ptr<PowerSource> source);

// Decides in_total for each sensor so that every physical consumer is counted once:
//   - if any Module sensor exists, the total is the Module sensors alone (a GH200 module
//     includes its GPU, CPU, memory and I/O, so NVML GPUs and Grace/CPU/SysIO would double count);
//   - otherwise the total is every Accelerator plus every CpuPackage sensor;
//   - Part and Other sensors are never summed.
void select_total(std::vector<SensorInfo>& sensors);

// Makes names unique by appending " #2", " #3", ... to repeats (the first keeps its name).
void make_names_unique(std::vector<SensorInfo>& sensors);

}  // namespace scaffold::energy
