// Tests of core/resources: sizes written for people, the free space of a file system, and
// recognising failed allocations in LibTorch's message formats (copied from LibTorch 1.13's
// c10/core/impl/alloc_cpu.cpp and CUDACachingAllocator.cpp, not produced by the code under test).
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <new>
#include <optional>
#include <stdexcept>

#include "core/error.hpp"
#include "core/memory_budget.hpp"
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

namespace scaffold::core {
namespace {

// LibTorch 1.13's message layout, written out: the message, then the backtrace.
TEST(StripBacktrace, DropsLibTorchsTraceAndKeepsTheMessageAroundIt) {
  const std::string c10 =
      "DefaultCPUAllocator: not enough memory: you tried to allocate 1000000000000 bytes.\n"
      "Exception raised from alloc_cpu at ../c10/core/impl/alloc_cpu.cpp:75 (most recent call "
      "first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in "
      "/lib/libc10.so)\n"
      "frame #1: c10::alloc_cpu(unsigned long) + 0x2b (0x7f in /lib/libc10.so)\n";
  EXPECT_EQ(strip_backtrace(c10),
            "DefaultCPUAllocator: not enough memory: you tried to allocate 1000000000000 bytes.");
  EXPECT_EQ(strip_backtrace("loading x.npy: " + c10 + "while building the model"),
            "loading x.npy: DefaultCPUAllocator: not enough memory: you tried to allocate "
            "1000000000000 bytes.\n"
            "while building the model");
  EXPECT_EQ(strip_backtrace("a plain message\nwith two lines"), "a plain message\nwith two lines");
  EXPECT_EQ(error_text(std::runtime_error(c10)).find("frame #"), std::string::npos);
}

TEST(MemoryBudget, RefusesNamingTheLargestItemsAndTheirKeys) {
  MemoryEstimate e;
  e.add("the mask", 3.0 * (1 << 30), {"seq_length"});
  e.add("the logits", 1.0 * (1 << 30), {"vocab_size", "seq_length"});
  e.add("a crumb", 10.0, {"crumb_key"});
  e.add("nothing", -5.0, {"negative_key"});  // counted as 0
  EXPECT_DOUBLE_EQ(e.total_bytes(), 4.0 * (1 << 30) + 10.0);
  EXPECT_NO_THROW(check_memory_budget("w", e, 4.0 * (1 << 30) + 10.0, "cpu"));
  try {
    check_memory_budget("w", e, 2.0 * (1 << 30), "cpu");
    FAIL() << "no error";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_EQ(m.rfind("w: this configuration needs at least 4.0 GiB per rank, more than the 2.0 "
                      "GiB available on cpu",
                      0),
              0u)
        << m;
    EXPECT_LT(m.find("the mask 3.0 GiB (seq_length)"),
              m.find("the logits 1.0 GiB (vocab_size, seq_length)"))
        << m;
    EXPECT_NE(m.find("reduce seq_length, vocab_size"), std::string::npos) << m;
    EXPECT_EQ(m.find("crumb"), std::string::npos) << "items under 1 % are not named: " << m;
  }
}

TEST(MemoryBudget, HostMemoryPerRankSplitsOverTheNodesRanks) {
  const std::optional<double> one = host_memory_per_rank_bytes(1),
                              four = host_memory_per_rank_bytes(4);
  ASSERT_TRUE(one && four);  // /proc/meminfo is there on Linux
  EXPECT_GT(*one, 0.0);
  EXPECT_NEAR(*four, *one / 4, *one * 0.05);  // MemAvailable moves a little between the two reads
}

}  // namespace
}  // namespace scaffold::core
