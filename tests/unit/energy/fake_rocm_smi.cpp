// A stand-in librocm_smi64 for the ROCm SMI source's tests: two fake GCDs, the second with an
// energy counter that reads 0 (as secondary MI250 GCDs do). Readings are set by fake_rsmi_set().
// For the end-to-end tests (loaded by `scaffold power` through LD_LIBRARY_PATH as
// librocm_smi64.so), FAKE_RSMI_POWER_UW="P0,P1" sets both GCDs' power at rsmi_init, and GCD 0's
// energy counter then starts at 1 and advances at P0 on the steady clock; GCD 1's stays 0.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeGcd {
  uint64_t power_uw = 0;
  uint64_t energy_count = 0;
};
FakeGcd g_gcds[2];
int g_initialized = 0;
constexpr float kResolutionUj = 15.3f;
bool g_clocked = false;  // FAKE_RSMI_POWER_UW given: GCD 0's counter follows the clock
std::chrono::steady_clock::time_point g_start;

}  // namespace

extern "C" {

void fake_rsmi_set(int gcd, uint64_t power_uw, uint64_t energy_count) {
  g_gcds[gcd].power_uw = power_uw;
  g_gcds[gcd].energy_count = energy_count;
}
float fake_rsmi_resolution_uj() {
  return kResolutionUj;
}
int fake_rsmi_initialized() {
  return g_initialized;
}

int rsmi_init(uint64_t) {
  ++g_initialized;
  if (const char* env = std::getenv("FAKE_RSMI_POWER_UW"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    g_gcds[0].power_uw = std::strtoull(env, &end, 10);
    g_gcds[1].power_uw = *end == ',' ? std::strtoull(end + 1, nullptr, 10) : g_gcds[0].power_uw;
    g_gcds[0].energy_count = 1;
    g_gcds[1].energy_count = 0;
    g_clocked = true;
    g_start = std::chrono::steady_clock::now();
  }
  return 0;
}
int rsmi_shut_down() {
  --g_initialized;
  return 0;
}
int rsmi_num_monitor_devices(uint32_t* n) {
  *n = 2;
  return 0;
}
int rsmi_dev_power_get(uint32_t dv, uint64_t* power, int* type) {
  if (dv >= 2) return 2;
  *power = g_gcds[dv].power_uw;
  *type = 1;
  return 0;
}
int rsmi_dev_energy_count_get(uint32_t dv, uint64_t* count, float* resolution,
                              uint64_t* timestamp) {
  if (dv >= 2) return 2;
  *count = g_gcds[dv].energy_count;
  if (g_clocked && dv == 0) {  // µW x s = µJ, in units of the resolution
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
    *count += static_cast<uint64_t>(static_cast<double>(g_gcds[0].power_uw) * s / kResolutionUj);
  }
  *resolution = kResolutionUj;
  *timestamp = 0;
  return 0;
}
int rsmi_dev_name_get(uint32_t, char* name, std::size_t length) {
  std::strncpy(name, "Fake MI250X", length);
  return 0;
}
int rsmi_status_string(int, const char** text) {
  *text = "fake status";
  return 0;
}

}  // extern "C"
