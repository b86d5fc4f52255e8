// The device choice and backend settings of train/device.hpp on a CPU build: the cpu and auto
// keys give the CPU with every rank's device listed for system.json, cuda without a GPU is an
// error naming the key, more_determinism switches deterministic algorithms on and the cuDNN
// autotuner off (and back), and memory_format's auto means channels-last on CUDA only. The
// rank -> GPU rule itself is tested without LibTorch in tests/unit/dist/test_device_map.cpp.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "dist/communicator.hpp"
#include "train/device.hpp"

namespace scaffold::train {
namespace {

// MPI singleton (no mpirun) for the whole binary.
class DeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { runtime() = std::make_unique<dist::Runtime>(nullptr, nullptr); }
  void TearDown() override { runtime().reset(); }
  static std::unique_ptr<dist::Runtime>& runtime() {
    static std::unique_ptr<dist::Runtime> r;
    return r;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new DeviceEnvironment);

dist::Communicator& world() { return DeviceEnvironment::runtime()->world(); }

TEST(SelectDevice, CpuAndAutoWithoutAGpuAreTheCpuListedPerRank) {
  for (const char* key : {"cpu", "auto"}) {
    if (std::string(key) == "auto" && torch::cuda::is_available()) continue;
    const DeviceChoice c = select_device(key, false, world());
    EXPECT_EQ(c.device, c10::Device(c10::kCPU)) << key;
    ASSERT_EQ(c.rank_devices.size(), static_cast<std::size_t>(world().size())) << key;
    EXPECT_EQ(c.rank_devices[0], core::host_name() + " cpu") << key;
  }
}

TEST(SelectDevice, CudaWithoutAGpuIsAnErrorNamingTheKey) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
  try {
    select_device("cuda", false, world());
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device: cuda was asked for"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use device: auto or cpu"), std::string::npos) << e.what();
  }
}

TEST(ApplyDeterminism, MoreDeterminismSelectsDeterministicAlgorithmsAndNoAutotuning) {
  apply_determinism(true);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().deterministicAlgorithmsWarnOnly());  // ScaFFold's warn_only
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
  ASSERT_NE(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr);  // cuBLAS's deterministic workspace

  apply_determinism(false);
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().benchmarkCuDNN());  // cudnn.benchmark = True (spec §6.1)
}

TEST(MemoryFormat, AutoIsChannelsLastOnCudaOnly) {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA, 1);
  EXPECT_FALSE(use_channels_last("auto", cpu));
  EXPECT_TRUE(use_channels_last("auto", cuda));
  EXPECT_TRUE(use_channels_last("channels_last", cpu));
  EXPECT_FALSE(use_channels_last("contiguous", cuda));
  EXPECT_THROW(use_channels_last("nhwc", cpu), core::Error);
}

}  // namespace
}  // namespace scaffold::train
