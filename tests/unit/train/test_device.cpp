// The device choice and backend settings of train/device.hpp on a CPU build: the cpu and auto
// keys give the CPU with every rank's device listed for system.json, cuda without a GPU is an
// error naming the key, more_determinism switches deterministic algorithms on and the cuDNN
// autotuner off (and back), and memory_format's auto means channels-last on CUDA only; the step
// seam's clock and feeder (on a GPU too, where one is visible: scripts/gpu-check). The rank -> GPU
// rule itself is tested without LibTorch in tests/unit/dist/test_device_map.cpp.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "dist/communicator.hpp"
#include "train/device.hpp"
#include "train/device_stream.hpp"

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

dist::Communicator& world() {
  return DeviceEnvironment::runtime()->world();
}

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
    EXPECT_NE(std::string(e.what()).find("device: cuda was asked for"), std::string::npos)
        << e.what();
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
  EXPECT_TRUE(at::globalContext().benchmarkCuDNN());  // cudnn.benchmark = True (docs/config.md)
}

TEST(MemoryFormat, AutoIsChannelsLastOnCudaOnly) {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA, 1);
  EXPECT_FALSE(use_channels_last("auto", cpu));
  EXPECT_TRUE(use_channels_last("auto", cuda));
  EXPECT_TRUE(use_channels_last("channels_last", cpu));
  EXPECT_FALSE(use_channels_last("contiguous", cuda));
  EXPECT_THROW(use_channels_last("nhwc", cpu), core::Error);
}

// ---- the step seam (train/device_stream.hpp) ---------------------------------------------------

data::Batch batch_of(int64_t first, bool pinned) {
  data::Batch b;
  at::Tensor image = at::arange(first, first + 24, at::kFloat).reshape({2, 3, 4});
  at::Tensor label = at::arange(first, first + 2, at::kLong);
  if (pinned) {
    image = image.pin_memory();
    label = label.pin_memory();
  }
  b.fields = {image, label};
  b.ids = {"example" + std::to_string(first), "example" + std::to_string(first + 1)};
  return b;
}

void expect_batch(const data::Batch& got, int64_t first, const c10::Device& device) {
  ASSERT_EQ(got.fields.size(), 2u);
  EXPECT_EQ(got.fields[0].device(), device);
  EXPECT_EQ(got.ids, batch_of(first, false).ids);
  EXPECT_TRUE(at::equal(got.fields[0].cpu(), batch_of(first, false).fields[0]))
      << "batch " << first;
  EXPECT_TRUE(at::equal(got.fields[1].cpu(), batch_of(first, false).fields[1]))
      << "batch " << first;
}

void check_feeder(const c10::Device& device, bool pinned) {
  const auto feeder = make_device_feeder(device);
  EXPECT_TRUE(feeder->empty());
  {
    // Prefetched two ahead; the host batches are gone before the copies are used.
    feeder->prefetch(batch_of(0, pinned));
    feeder->prefetch(batch_of(100, pinned));
  }
  EXPECT_FALSE(feeder->empty());
  expect_batch(feeder->take(), 0, device);
  feeder->prefetch(batch_of(200, pinned));
  expect_batch(feeder->take(), 100, device);
  expect_batch(feeder->take(), 200, device);
  EXPECT_TRUE(feeder->empty());
}

void check_clock(const c10::Device& device) {
  const auto clock = make_step_clock(device);
  const at::Tensor a = at::randn({256, 256}, at::TensorOptions().device(device));
  at::Tensor c;
  for (int step = 0; step < 3; ++step) {
    clock->start();
    for (int i = 0; i < 20; ++i) c = at::mm(a, a).tanh_();
    clock->stop();
  }
  const std::vector<double> steps_s = clock->collect_s();
  ASSERT_EQ(steps_s.size(), 3u);
  for (double s : steps_s) {
    EXPECT_GT(s, 0.0);
    EXPECT_LT(s, 10.0);
  }
  EXPECT_TRUE(clock->collect_s().empty());  // read once: forgotten afterwards
}

TEST(StepSeam, HostClockAndFeederOnTheCpu) {
  check_clock(c10::Device(c10::kCPU));
  check_feeder(c10::Device(c10::kCPU), /*pinned=*/false);
}

// The ROCm clock: the device's work that is still running when stop() is called belongs to the
// step, and work queued before start() does not. A fake device whose "wait" takes 30 ms at
// stop (the step's kernels finishing) and 50 ms at start (the previous work) stands in for HIP.
TEST(StepSeam, TheSynchronizingClockCountsTheDeviceWorkOfTheStepOnly) {
  int waits = 0;
  const auto clock = make_synchronizing_step_clock([&waits] {
    const int ms = waits % 2 == 0 ? 50 : 30;  // start, stop, start, stop ...
    ++waits;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  });
  for (int step = 0; step < 2; ++step) {
    clock->start();
    clock->stop();
  }
  EXPECT_EQ(waits, 4);
  const std::vector<double> steps_s = clock->collect_s();
  ASSERT_EQ(steps_s.size(), 2u);
  for (double s : steps_s) {
    EXPECT_GE(s, 0.029);          // the 30 ms that finish the step are in it
    EXPECT_LT(s, 0.050 + 0.029);  // the 50 ms before it are not (slack for a loaded machine)
  }
  EXPECT_TRUE(clock->collect_s().empty());
}

TEST(StepSeam, CudaEventsAndTheCopyStreamOnAGpu) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no GPU (the CUDA seam runs in scripts/gpu-check)";
  const c10::Device gpu(c10::kCUDA, 0);
  check_clock(gpu);
  check_feeder(gpu, /*pinned=*/true);
  check_feeder(gpu, /*pinned=*/false);  // pageable host memory: still correct, only not overlapped
}

TEST(SelectDevice, CudaGivesEachRankItsGpuAndNamesIt) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const DeviceChoice c = select_device("cuda", false, world());
  EXPECT_TRUE(c.device.is_cuda());
  ASSERT_EQ(c.rank_devices.size(), static_cast<std::size_t>(world().size()));
  EXPECT_NE(c.rank_devices[0].find(" cuda:"), std::string::npos) << c.rank_devices[0];
  EXPECT_NE(c.rank_devices[0].find("pci="), std::string::npos) << c.rank_devices[0];
  EXPECT_EQ(select_device("auto", false, world()).device, c.device);
}

}  // namespace
}  // namespace scaffold::train
