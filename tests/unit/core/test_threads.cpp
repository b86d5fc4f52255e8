// parallel_for visits every index exactly once and propagates the first exception.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "core/threads.hpp"

namespace scaffold::core {
namespace {

TEST(Threads, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 7}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(hits.size(), threads, [&](int, std::size_t i) { hits[i]++; });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads=" << threads;
  }
}

TEST(Threads, ExceptionReachesCaller) {
  EXPECT_THROW(parallel_for(100, 3,
                            [](int, std::size_t i) {
                              if (i == 42) throw std::runtime_error("boom");
                            }),
               std::runtime_error);
}

TEST(Threads, DefaultHonoursOmpNumThreads) {
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(default_thread_count(), 3);
  ::setenv("OMP_NUM_THREADS", "junk", 1);
  EXPECT_GE(default_thread_count(), 1);
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_GE(default_thread_count(), 1);
}

}  // namespace
}  // namespace scaffold::core
