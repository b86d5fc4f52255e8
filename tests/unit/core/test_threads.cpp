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

// A set OMP_NUM_THREADS that is not used is a warning naming the value (issue 16, item 4); a
// usable one, or none, says nothing. The values are what users have typed.
TEST(Threads, UnusableOmpNumThreadsWarnsWithItsValue) {
  for (const char* bad : {"junk", "0", "-3", "4x", "", "100000", "99999999999999999999"}) {
    ::setenv("OMP_NUM_THREADS", bad, 1);
    const std::string w = omp_num_threads_warning();
    EXPECT_NE(w.find(std::string("OMP_NUM_THREADS='") + bad + "'"), std::string::npos)
        << "value '" << bad << "': " << w;
    EXPECT_GE(default_thread_count(), 1);
    EXPECT_LE(default_thread_count(), 1024) << bad;
  }
  for (const char* good : {"1", "3", "1024"}) {
    ::setenv("OMP_NUM_THREADS", good, 1);
    EXPECT_EQ(omp_num_threads_warning(), "") << good;
    EXPECT_EQ(default_thread_count(), std::atoi(good));
  }
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(omp_num_threads_warning(), "");
}

}  // namespace
}  // namespace scaffold::core
