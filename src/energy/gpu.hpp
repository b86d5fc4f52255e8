// Accelerator power sources loaded at run time with dlopen, so the binary runs (and `auto`
// simply finds nothing) where the vendor library is absent: NVIDIA NVML and AMD ROCm SMI.
// Both enumerate every device of the node, whatever CUDA/ROCR_VISIBLE_DEVICES says.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "energy/sensor.hpp"

namespace scaffold::energy {

struct NvmlOptions {
  std::vector<std::string> libraries = {"libnvidia-ml.so.1"};  // tried in order
  // Instant power from the field API (NVML_FI_DEV_POWER_INSTANT) where the driver has it;
  // nvmlDeviceGetPowerUsage is a 1-s average on Ampere (but GA100) and newer.
  bool instant_power = true;
};

// Sensors "nvml:<index>" (Accelerator), in W; the counter is nvmlDeviceGetTotalEnergyConsumption
// (mJ since the driver loaded, Volta and newer) where supported.
std::unique_ptr<PowerSource> make_nvml_source(const NvmlOptions& options = {});

struct RocmSmiOptions {
  // Tried in order; empty: librocm_smi64.so, .so.7, .so.6, .so.5, .so.1, then
  // $ROCM_PATH/lib/librocm_smi64.so and /opt/rocm/lib/librocm_smi64.so.
  std::vector<std::string> libraries;
};

// Sensors "rocm:<index>" (Accelerator), in W from rsmi_dev_power_get (rsmi_dev_power_ave_get on
// older libraries); the counter is rsmi_dev_energy_count_get × resolution. A counter that reads 0
// at start is taken as absent (secondary MI250 GCDs, as jpwr does).
std::unique_ptr<PowerSource> make_rocm_smi_source(const RocmSmiOptions& options = {});

}  // namespace scaffold::energy
