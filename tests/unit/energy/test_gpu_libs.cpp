// The dlopen'ed sources against stand-in libraries (fake_nvml.cpp, fake_rocm_smi.cpp): library
// loading, device probing (instant vs averaged power, counters present or not), unit
// conversion, shutdown, and the message when the library is absent.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "energy/gpu.hpp"
#include "unit/energy/energy_test_util.hpp"

namespace scaffold::energy {
namespace {

using test::close;

// The test's own handle on the stand-in library (the same loaded object the source opens).
class Library {
 public:
  explicit Library(const char* path) : handle_(::dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  template <typename Fn>
  Fn fn(const char* name) const {
    void* p = handle_ ? ::dlsym(handle_, name) : nullptr;
    Fn f = nullptr;
    std::memcpy(&f, &p, sizeof f);
    return f;
  }
  bool ok() const { return handle_ != nullptr; }

 private:
  void* handle_;
};

TEST(NvmlSource, LoadsProbesAndConvertsUnits) {
  Library lib(FAKE_NVML_LIBRARY);
  ASSERT_TRUE(lib.ok()) << ::dlerror();
  const auto set = lib.fn<void (*)(int, unsigned, unsigned long long)>("fake_nvml_set");
  const auto initialized = lib.fn<int (*)()>("fake_nvml_initialized");
  const auto instant = lib.fn<void (*)(int)>("fake_nvml_instant_supported");
  set(0, 250500, 1000000);
  set(1, 80000, 0);
  instant(1);

  NvmlOptions o;
  o.libraries = {"libscaffold-test-no-such-nvml.so", FAKE_NVML_LIBRARY};
  auto source = make_nvml_source(o);
  const auto sensors = source->init();
  ASSERT_EQ(sensors.size(), 2u);
  EXPECT_EQ(initialized(), 1);
  EXPECT_EQ(sensors[0].name, "nvml:0");
  EXPECT_EQ(sensors[1].name, "nvml:1");
  EXPECT_EQ(sensors[0].kind, SensorKind::Accelerator);
  EXPECT_TRUE(sensors[0].has_counter);
  EXPECT_FALSE(sensors[1].has_counter);
  EXPECT_NE(sensors[0].detail.find("Fake H100"), std::string::npos) << sensors[0].detail;
  EXPECT_NE(sensors[0].detail.find("instant"), std::string::npos) << sensors[0].detail;

  std::vector<SensorReading> r(2);
  source->sample(r);
  EXPECT_TRUE(close("instant W", r[0].power_w, 250.5, 1e-12));
  EXPECT_TRUE(close("counter J", r[0].counter_j, 1000.0, 1e-12));
  EXPECT_TRUE(close("instant W gpu1", r[1].power_w, 80.0, 1e-12));
  EXPECT_TRUE(std::isnan(r[1].counter_j));
  source->finalize();
  EXPECT_EQ(initialized(), 0);

  // Without the instant field, nvmlDeviceGetPowerUsage (the fake adds 1 W to tell them apart).
  instant(0);
  auto averaged = make_nvml_source(o);
  const auto s2 = averaged->init();
  EXPECT_NE(s2[0].detail.find("nvmlDeviceGetPowerUsage"), std::string::npos) << s2[0].detail;
  averaged->sample(r);
  EXPECT_TRUE(close("averaged W", r[0].power_w, 251.5, 1e-12));
  averaged.reset();  // the destructor shuts NVML down too
  EXPECT_EQ(initialized(), 0);
  instant(1);
}

TEST(NvmlSource, AbsentLibraryIsUnavailableNamingIt) {
  NvmlOptions o;
  o.libraries = {"libscaffold-test-no-such-nvml.so.1"};
  try {
    make_nvml_source(o)->init();
    ADD_FAILURE() << "must throw";
  } catch (const SourceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("libscaffold-test-no-such-nvml.so.1"), std::string::npos)
        << e.what();
  }
}

TEST(RocmSmiSource, LoadsAndTreatsAZeroCounterAsAbsent) {
  Library lib(FAKE_ROCM_SMI_LIBRARY);
  ASSERT_TRUE(lib.ok()) << ::dlerror();
  const auto set = lib.fn<void (*)(int, uint64_t, uint64_t)>("fake_rsmi_set");
  const auto resolution = lib.fn<float (*)()>("fake_rsmi_resolution_uj");
  const auto initialized = lib.fn<int (*)()>("fake_rsmi_initialized");
  set(0, 312250000, 1000000);
  set(1, 0, 0);

  RocmSmiOptions o;
  o.libraries = {FAKE_ROCM_SMI_LIBRARY};
  auto source = make_rocm_smi_source(o);
  const auto sensors = source->init();
  ASSERT_EQ(sensors.size(), 2u);
  EXPECT_EQ(sensors[0].name, "rocm:0");
  EXPECT_TRUE(sensors[0].has_counter);
  EXPECT_FALSE(sensors[1].has_counter);  // counter read 0 at start
  EXPECT_EQ(initialized(), 1);
  set(0, 300000000, 3000000);
  std::vector<SensorReading> r(2);
  source->sample(r);
  EXPECT_TRUE(close("power W", r[0].power_w, 300.0, 1e-12));
  EXPECT_TRUE(close("counter J", r[0].counter_j, 3000000.0 * double(resolution()) * 1e-6, 1e-9));
  EXPECT_EQ(r[1].power_w, 0.0);
  EXPECT_TRUE(std::isnan(r[1].counter_j));
  source->finalize();
  EXPECT_EQ(initialized(), 0);
}

TEST(RocmSmiSource, AbsentLibraryIsUnavailableNamingWhatWasTried) {
  RocmSmiOptions o;
  o.libraries = {"libscaffold-test-a.so", "libscaffold-test-b.so"};
  try {
    make_rocm_smi_source(o)->init();
    ADD_FAILURE() << "must throw";
  } catch (const SourceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("not found: libscaffold-test-a.so, libscaffold-test-b.so"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace scaffold::energy
