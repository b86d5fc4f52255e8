// A stand-in libnvidia-ml for the NVML source's tests: the handful of entry points scaffold
// loads, over two fake GPUs whose readings the test sets through fake_nvml_set(). It follows
// nvml.h's signatures, so it checks scaffold's loading, probing and unit handling, not the ABI.
// For the end-to-end tests (loaded by `scaffold power` through LD_LIBRARY_PATH as
// libnvidia-ml.so.1), FAKE_NVML_POWER_MW="P0,P1" sets both GPUs' power at nvmlInit, and GPU 0's
// energy counter then advances at P0 on the steady clock, as a real one would.
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeGpu {
  unsigned power_mw = 0;
  unsigned long long energy_mj = 0;
};
FakeGpu g_gpus[2];
int g_initialized = 0;
int g_instant_supported = 1;
bool g_clocked = false;  // FAKE_NVML_POWER_MW given: the counter follows the clock
std::chrono::steady_clock::time_point g_start;

struct FieldValue {  // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;
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

int index_of(void* dev) {
  return static_cast<int>(static_cast<FakeGpu*>(dev) - g_gpus);
}

}  // namespace

extern "C" {

void fake_nvml_set(int gpu, unsigned power_mw, unsigned long long energy_mj) {
  g_gpus[gpu].power_mw = power_mw;
  g_gpus[gpu].energy_mj = energy_mj;
}
void fake_nvml_instant_supported(int yes) {
  g_instant_supported = yes;
}
int fake_nvml_initialized() {
  return g_initialized;
}

int nvmlInit_v2() {
  ++g_initialized;
  if (const char* env = std::getenv("FAKE_NVML_POWER_MW"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    g_gpus[0].power_mw = static_cast<unsigned>(std::strtoul(env, &end, 10));
    g_gpus[1].power_mw = *end == ',' ? static_cast<unsigned>(std::strtoul(end + 1, nullptr, 10))
                                     : g_gpus[0].power_mw;
    g_clocked = true;
    g_start = std::chrono::steady_clock::now();
  }
  return 0;
}
int nvmlShutdown() {
  --g_initialized;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** dev) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *dev = &g_gpus[index];
  return 0;
}
int nvmlDeviceGetName(void* dev, char* name, unsigned length) {
  std::strncpy(name, index_of(dev) == 0 ? "Fake H100" : "Fake H200", length);
  return 0;
}
int nvmlDeviceGetPowerUsage(void* dev, unsigned* mw) {
  // The 1-s average differs from the instant value, so the test sees which one was used.
  *mw = static_cast<FakeGpu*>(dev)->power_mw + 1000;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* dev, unsigned long long* mj) {
  if (index_of(dev) == 1) return 3;  // NVML_ERROR_NOT_SUPPORTED: GPU 1 has no counter
  const FakeGpu& gpu = *static_cast<FakeGpu*>(dev);
  *mj = gpu.energy_mj;
  if (g_clocked) {  // mW x s = mJ
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
    *mj += static_cast<unsigned long long>(gpu.power_mw * s);
  }
  return 0;
}
int nvmlDeviceGetFieldValues(void* dev, int count, FieldValue* values) {
  for (int i = 0; i < count; ++i) {
    if (values[i].field_id != 186 || !g_instant_supported) {
      values[i].nvml_return = 3;
      continue;
    }
    values[i].nvml_return = 0;
    values[i].value_type = 1;  // unsigned int
    values[i].value.ui = static_cast<FakeGpu*>(dev)->power_mw;
  }
  return 0;
}
const char* nvmlErrorString(int) {
  return "fake error";
}

}  // extern "C"
