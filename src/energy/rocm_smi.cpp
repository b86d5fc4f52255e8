// ROCm SMI power source through dlopen (librocm_smi64): power and the energy accumulator of
// every AMD GPU/GCD. The few functions used are declared here with rocm_smi.h's C ABI.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "energy/dynlib.hpp"
#include "energy/gpu.hpp"

namespace scaffold::energy {

namespace {

constexpr int kRsmiSuccess = 0;

using FnInit = int (*)(uint64_t);
using FnShutdown = int (*)();
using FnCount = int (*)(uint32_t*);
using FnPower = int (*)(uint32_t, uint64_t*, int*);                // rsmi_dev_power_get (µW)
using FnPowerAve = int (*)(uint32_t, uint32_t, uint64_t*);         // rsmi_dev_power_ave_get (µW)
using FnEnergy = int (*)(uint32_t, uint64_t*, float*, uint64_t*);  // count, resolution µJ, ts
using FnName = int (*)(uint32_t, char*, std::size_t);
using FnStatus = int (*)(int, const char**);

std::vector<std::string> default_libraries() {
  std::vector<std::string> names = {"librocm_smi64.so", "librocm_smi64.so.7", "librocm_smi64.so.6",
                                    "librocm_smi64.so.5", "librocm_smi64.so.1"};
  if (const char* rocm = std::getenv("ROCM_PATH"); rocm && *rocm)
    names.push_back(std::string(rocm) + "/lib/librocm_smi64.so");
  names.push_back("/opt/rocm/lib/librocm_smi64.so");
  return names;
}

class RocmSmiSource final : public PowerSource {
 public:
  explicit RocmSmiSource(RocmSmiOptions options) : options_(std::move(options)) {}
  ~RocmSmiSource() override { finalize(); }
  std::string method() const override { return "rocm"; }

  std::vector<SensorInfo> init() override {
    const auto libraries = options_.libraries.empty() ? default_libraries() : options_.libraries;
    std::string error;
    if (!lib_.open(libraries, &error))
      throw SourceUnavailable("ROCm SMI not available: dlopen failed (" + error + ")");
    const auto init = lib_.function<FnInit>("rsmi_init");
    const auto count = lib_.function<FnCount>("rsmi_num_monitor_devices");
    const auto name_of = lib_.function<FnName>("rsmi_dev_name_get");
    shutdown_ = lib_.function<FnShutdown>("rsmi_shut_down");
    power_ = lib_.function<FnPower>("rsmi_dev_power_get");
    power_ave_ = lib_.function<FnPowerAve>("rsmi_dev_power_ave_get");
    energy_ = lib_.function<FnEnergy>("rsmi_dev_energy_count_get");
    status_string_ = lib_.function<FnStatus>("rsmi_status_string");
    if (!init || !count || (!power_ && !power_ave_)) {
      lib_.close();
      throw SourceUnavailable("ROCm SMI library " + lib_.name() +
                              " lacks rsmi_init/rsmi_num_monitor_devices/power functions");
    }
    if (const int rc = init(0); rc != kRsmiSuccess) {
      const std::string why = describe(rc);
      lib_.close();
      throw SourceUnavailable("ROCm SMI not available: rsmi_init failed (" + why + ")");
    }
    initialized_ = true;
    uint32_t n = 0;
    if (count(&n) != kRsmiSuccess) n = 0;
    std::vector<SensorInfo> sensors;
    for (uint32_t i = 0; i < n; ++i) {
      Gpu gpu{i, false, !power_};
      if (std::isnan(read_power(gpu))) {
        gpu.average = !gpu.average && power_ave_;
        if (!gpu.average || std::isnan(read_power(gpu))) {
          LOG_DEBUG("rocm: device {} reports no power: skipped", i);
          continue;
        }
      }
      SensorInfo info;
      info.name = "rocm:" + std::to_string(i);
      info.jpwr_name = info.name;
      info.source = method();
      info.kind = SensorKind::Accelerator;
      char text[128] = {};
      info.detail = (name_of && name_of(i, text, sizeof text) == kRsmiSuccess) ? text : "AMD GPU";
      info.detail +=
          gpu.average ? ", power: rsmi_dev_power_ave_get" : ", power: rsmi_dev_power_get";
      // A counter reading 0 at start is a device without one (secondary MI250 GCDs).
      const double counter = read_counter(i);
      gpu.counter = !std::isnan(counter) && counter > 0.0;
      info.has_counter = gpu.counter;
      if (info.has_counter) info.detail += ", counter: rsmi_dev_energy_count_get";
      gpus_.push_back(gpu);
      sensors.push_back(info);
    }
    if (sensors.empty()) {
      finalize();
      throw SourceUnavailable(n == 0 ? "ROCm SMI found no GPU"
                                     : "ROCm SMI: none of " + std::to_string(n) +
                                           " devices reports power");
    }
    return sensors;
  }

  void sample(std::vector<SensorReading>& out) override {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      out[i].power_w = read_power(gpus_[i]);
      if (gpus_[i].counter) out[i].counter_j = read_counter(gpus_[i].index);
    }
  }

  void finalize() override {
    if (initialized_ && shutdown_) shutdown_();
    initialized_ = false;
    lib_.close();
  }

 private:
  struct Gpu {
    uint32_t index;
    bool counter;
    bool average;  // rsmi_dev_power_ave_get instead of rsmi_dev_power_get
  };

  double read_power(const Gpu& gpu) const {
    uint64_t uw = 0;
    int type = 0;
    const int rc = gpu.average ? power_ave_(gpu.index, 0, &uw) : power_(gpu.index, &uw, &type);
    return rc == kRsmiSuccess ? static_cast<double>(uw) * 1e-6 : kNaN;
  }
  double read_counter(uint32_t index) const {
    uint64_t count = 0, timestamp = 0;
    float resolution_uj = 0.0f;
    if (!energy_ || energy_(index, &count, &resolution_uj, &timestamp) != kRsmiSuccess) return kNaN;
    return static_cast<double>(count) * static_cast<double>(resolution_uj) * 1e-6;
  }
  std::string describe(int rc) const {
    const char* s = nullptr;
    if (status_string_ && status_string_(rc, &s) == kRsmiSuccess && s) return s;
    return "status " + std::to_string(rc);
  }

  RocmSmiOptions options_;
  detail::DynamicLibrary lib_;
  bool initialized_ = false;
  FnShutdown shutdown_ = nullptr;
  FnPower power_ = nullptr;
  FnPowerAve power_ave_ = nullptr;
  FnEnergy energy_ = nullptr;
  FnStatus status_string_ = nullptr;
  std::vector<Gpu> gpus_;
};

}  // namespace

std::unique_ptr<PowerSource> make_rocm_smi_source(const RocmSmiOptions& options) {
  return std::make_unique<RocmSmiSource>(options);
}

}  // namespace scaffold::energy
