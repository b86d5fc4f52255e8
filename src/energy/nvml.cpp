// NVML power source through dlopen: no NVML header or library at build time, so the few types
// used are declared here with the ABI of nvml.h (stable since CUDA 10).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "energy/dynlib.hpp"
#include "energy/gpu.hpp"

namespace scaffold::energy {

namespace {

constexpr int kNvmlSuccess = 0;
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, mW

// nvmlFieldValue_t
struct NvmlFieldValue {
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;  // nvmlValueType_t
  int nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};

double field_as_double(const NvmlFieldValue& f) {
  switch (f.value_type) {
    case 0:
      return f.value.d;
    case 1:
      return static_cast<double>(f.value.ui);
    case 2:
      return static_cast<double>(f.value.ul);
    case 3:
      return static_cast<double>(f.value.ull);
    case 4:
      return static_cast<double>(f.value.sll);
    case 5:
      return static_cast<double>(f.value.si);
    default:
      return kNaN;
  }
}

using Device = void*;  // nvmlDevice_t
using FnInit = int (*)();
using FnCount = int (*)(unsigned*);
using FnHandle = int (*)(unsigned, Device*);
using FnPower = int (*)(Device, unsigned*);
using FnEnergy = int (*)(Device, unsigned long long*);
using FnFields = int (*)(Device, int, NvmlFieldValue*);
using FnString = int (*)(Device, char*, unsigned);
using FnError = const char* (*)(int);

class NvmlSource final : public PowerSource {
 public:
  explicit NvmlSource(NvmlOptions options) : options_(std::move(options)) {}
  ~NvmlSource() override { finalize(); }
  std::string method() const override { return "nvml"; }

  std::vector<SensorInfo> init() override {
    std::string error;
    if (!lib_.open(options_.libraries, &error))
      throw SourceUnavailable("NVML not available: dlopen failed (" + error + ")");
    auto init = lib_.function<FnInit>("nvmlInit_v2");
    if (!init) init = lib_.function<FnInit>("nvmlInit");
    auto count = lib_.function<FnCount>("nvmlDeviceGetCount_v2");
    if (!count) count = lib_.function<FnCount>("nvmlDeviceGetCount");
    auto handle = lib_.function<FnHandle>("nvmlDeviceGetHandleByIndex_v2");
    if (!handle) handle = lib_.function<FnHandle>("nvmlDeviceGetHandleByIndex");
    shutdown_ = lib_.function<FnInit>("nvmlShutdown");
    power_ = lib_.function<FnPower>("nvmlDeviceGetPowerUsage");
    energy_ = lib_.function<FnEnergy>("nvmlDeviceGetTotalEnergyConsumption");
    fields_ = lib_.function<FnFields>("nvmlDeviceGetFieldValues");
    error_string_ = lib_.function<FnError>("nvmlErrorString");
    const auto name_of = lib_.function<FnString>("nvmlDeviceGetName");
    const auto uuid_of = lib_.function<FnString>("nvmlDeviceGetUUID");
    if (!init || !count || !handle || (!power_ && !fields_)) {
      lib_.close();
      throw SourceUnavailable(
          "NVML library " + lib_.name() +
          " lacks nvmlInit/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex/power functions");
    }
    if (const int rc = init(); rc != kNvmlSuccess) {
      const std::string why = describe(rc);
      lib_.close();
      throw SourceUnavailable("NVML not available: nvmlInit failed (" + why + ")");
    }
    initialized_ = true;
    unsigned n = 0;
    if (const int rc = count(&n); rc != kNvmlSuccess) {
      const std::string why = describe(rc);
      finalize();
      throw SourceUnavailable("NVML: nvmlDeviceGetCount failed (" + why + ")");
    }
    std::vector<SensorInfo> sensors;
    for (unsigned i = 0; i < n; ++i) {
      Device dev = nullptr;
      if (handle(i, &dev) != kNvmlSuccess) {
        LOG_DEBUG("nvml: no handle for GPU {}: skipped", i);
        continue;
      }
      Gpu gpu{dev, false};
      SensorInfo info;
      info.name = "nvml:" + std::to_string(i);
      info.jpwr_name = "pynvml:" + std::to_string(i);  // jpwr's index: NVML's, as ours
      info.source = method();
      info.kind = SensorKind::Accelerator;
      char text[96] = {};
      info.detail =
          (name_of && name_of(dev, text, sizeof text) == kNvmlSuccess) ? text : "NVIDIA GPU";
      if (uuid_of && uuid_of(dev, text, sizeof text) == kNvmlSuccess)
        info.detail += std::string(" ") + text;
      gpu.instant = options_.instant_power && fields_ && !std::isnan(read_instant(dev));
      if (!gpu.instant && !(power_ && !std::isnan(read_usage(dev)))) {
        LOG_DEBUG("nvml: GPU {} reports no power: skipped", i);
        continue;
      }
      info.detail += gpu.instant ? ", power: instant field" : ", power: nvmlDeviceGetPowerUsage";
      unsigned long long mj = 0;
      info.has_counter = energy_ && energy_(dev, &mj) == kNvmlSuccess;
      if (info.has_counter) info.detail += ", counter: nvmlDeviceGetTotalEnergyConsumption";
      gpus_.push_back(gpu);
      has_counter_.push_back(info.has_counter);
      sensors.push_back(info);
    }
    if (sensors.empty()) {
      finalize();
      throw SourceUnavailable(n == 0
                                  ? "NVML found no GPU"
                                  : "NVML: none of " + std::to_string(n) + " GPUs reports power");
    }
    return sensors;
  }

  void sample(std::vector<SensorReading>& out) override {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      out[i].power_w = gpus_[i].instant ? read_instant(gpus_[i].dev) : read_usage(gpus_[i].dev);
      unsigned long long mj = 0;
      if (has_counter_[i] && energy_(gpus_[i].dev, &mj) == kNvmlSuccess)
        out[i].counter_j = static_cast<double>(mj) * 1e-3;
    }
  }

  void finalize() override {
    if (initialized_ && shutdown_) shutdown_();
    initialized_ = false;
    lib_.close();
  }

 private:
  struct Gpu {
    Device dev;
    bool instant;
  };

  double read_instant(Device dev) const {
    NvmlFieldValue f{};
    f.field_id = kFieldPowerInstant;
    if (fields_(dev, 1, &f) != kNvmlSuccess || f.nvml_return != kNvmlSuccess) return kNaN;
    return field_as_double(f) * 1e-3;  // mW
  }
  double read_usage(Device dev) const {
    unsigned mw = 0;
    return power_(dev, &mw) == kNvmlSuccess ? mw * 1e-3 : kNaN;
  }
  std::string describe(int rc) const {
    const char* s = error_string_ ? error_string_(rc) : nullptr;
    return s ? std::string(s) : "error " + std::to_string(rc);
  }

  NvmlOptions options_;
  detail::DynamicLibrary lib_;
  bool initialized_ = false;
  FnInit shutdown_ = nullptr;
  FnPower power_ = nullptr;
  FnEnergy energy_ = nullptr;
  FnFields fields_ = nullptr;
  FnError error_string_ = nullptr;
  std::vector<Gpu> gpus_;
  std::vector<bool> has_counter_;
};

}  // namespace

std::unique_ptr<PowerSource> make_nvml_source(const NvmlOptions& options) {
  return std::make_unique<NvmlSource>(options);
}

}  // namespace scaffold::energy
