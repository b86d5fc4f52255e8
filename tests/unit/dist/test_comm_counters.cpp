// The named registry of communication counters (dist/comm_counters.hpp): counts add up per name,
// an unknown name reads as zeros, every counter is listed, and adds from several threads at once
// lose nothing. Names here start with "test." so they cannot meet a module's.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "dist/comm_counters.hpp"

namespace scaffold::dist {
namespace {

TEST(CommCounters, AddUpPerNameAndAnUnknownNameIsZero) {
  count_comm("test.a", 1, 100, 0.5);
  count_comm("test.a", 2, 50, 0.25);
  count_comm("test.b", 1, 7, 1.0);
  const CommCounter a = comm_counter("test.a");
  EXPECT_EQ(a.calls, 3);
  EXPECT_EQ(a.bytes, 150);
  EXPECT_DOUBLE_EQ(a.seconds, 0.75);
  EXPECT_EQ(comm_counter("test.b").bytes, 7);
  const CommCounter none = comm_counter("test.never");
  EXPECT_EQ(none.calls, 0);
  EXPECT_EQ(none.bytes, 0);
  EXPECT_EQ(none.seconds, 0.0);
  const auto all = comm_counters();
  ASSERT_EQ(all.count("test.a"), 1u);
  EXPECT_EQ(all.at("test.a").calls, 3);
  EXPECT_EQ(all.count("test.never"), 0u);
}

TEST(CommCounters, ConcurrentAddsAreAllCounted) {
  constexpr int kThreads = 4, kAdds = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kAdds; ++i) count_comm("test.threads", 1, 2, 0.0);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(comm_counter("test.threads").calls, kThreads * kAdds);
  EXPECT_EQ(comm_counter("test.threads").bytes, 2 * kThreads * kAdds);
}

}  // namespace
}  // namespace scaffold::dist
