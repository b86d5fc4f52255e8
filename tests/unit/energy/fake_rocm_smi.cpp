// A stand-in librocm_smi64 for the ROCm SMI source's tests: two fake GCDs, the second with an
// energy counter that reads 0 (as secondary MI250 GCDs do). Readings are set by fake_rsmi_set().
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

struct FakeGcd {
  uint64_t power_uw = 0;
  uint64_t energy_count = 0;
};
FakeGcd g_gcds[2];
int g_initialized = 0;
constexpr float kResolutionUj = 15.3f;

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
