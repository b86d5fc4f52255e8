// Tests of core/resources: sizes written for people, the free space of a file system, and
// recognising failed allocations in LibTorch's message formats (copied from LibTorch 1.13's
// c10/core/impl/alloc_cpu.cpp and CUDACachingAllocator.cpp, not produced by the code under test).
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <new>
#include <stdexcept>

#include "core/resources.hpp"
#include "test_util.hpp"

namespace scaffold::core {
namespace {

TEST(HumanBytes, PowersOf1024WithOneDecimal) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(50.0 * 1024 * 1024 * 1024), "50.0 GiB");
  EXPECT_EQ(human_bytes(1080000000000.0), "1005.8 GiB");
  EXPECT_EQ(human_bytes(3.0 * 1024 * 1024 * 1024 * 1024), "3.0 TiB");
}

TEST(FileSystemSpace, AgreesWithStatvfsAndWalksUpToAnExistingParent) {
  test::TempDir dir;
  const auto space = file_system_space(dir.path() / "not" / "yet" / "made");
  ASSERT_TRUE(space.has_value());
  EXPECT_EQ(space->mount_probe, dir.path().string());
  struct statvfs st {};
  ASSERT_EQ(::statvfs(dir.path().c_str(), &st), 0);
  const double expected = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
  // Other writers may change the free space between the two calls: within 1 GiB.
  EXPECT_NEAR(static_cast<double>(space->free_bytes), expected, 1024.0 * 1024 * 1024);
}

TEST(AllocationFailure, RecognisesLibTorchsMessagesAndTheBytesTheyName) {
  const std::runtime_error cpu(
      "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: "
      "you tried to "
      "allocate 1080000000000 bytes. Error code 12 (Cannot allocate memory)\nframe #0: "
      "c10::ThrowEnforceNotMet");
  auto f = allocation_failure(cpu);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bytes, 1080000000000);
  EXPECT_EQ(f->first_line.find('\n'), std::string::npos);
  EXPECT_NE(f->first_line.find("DefaultCPUAllocator"), std::string::npos);

  const std::runtime_error older(
      "DefaultCPUAllocator: not enough memory: you tried to allocate 4096 bytes. Buy new RAM!");
  f = allocation_failure(older);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bytes, 4096);

  const std::runtime_error cuda(
      "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; 75.20 GiB "
      "already "
      "allocated; 1.31 GiB free; 76.00 GiB reserved in total by PyTorch)");
  f = allocation_failure(cuda);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bytes, int64_t{2} << 30);

  const std::runtime_error cuda_mib("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; ...)");
  f = allocation_failure(cuda_mib);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bytes, 20 * 1024 * 1024);

  f = allocation_failure(std::bad_alloc());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bytes, -1);

  EXPECT_FALSE(allocation_failure(std::runtime_error("training diverged at epoch 3")).has_value());
  EXPECT_FALSE(allocation_failure(std::runtime_error("index 9 is out of bounds for dimension 1"))
                   .has_value());
}

}  // namespace
}  // namespace scaffold::core
