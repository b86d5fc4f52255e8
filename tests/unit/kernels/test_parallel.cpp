// kernels::parallel_for, the kernels' compiled parallel loop: every index of the range exactly
// once, in contiguous chunks no smaller than the grain (but the last), on LibTorch's own OpenMP
// threads (two threads seen, each inside a region LibTorch recognises as parallel), serially
// when nested or on one thread, and the first exception rethrown in the caller. The check that
// matters most is the second: the trap it replaces (at::parallel_for compiled without OpenMP)
// ran every kernel on one thread without a word.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/parallel.hpp"

namespace scaffold::kernels {
namespace {

// Sets LibTorch's intra-op thread count for one test, and puts the old one back.
class Threads {
 public:
  explicit Threads(int n) : old_(at::get_num_threads()) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(old_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int old_;
};

std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t begin, int64_t end, int64_t grain) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    const std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(KernelsParallelFor, CoversTheRangeOnceInChunksOfAtLeastTheGrain) {
  const Threads threads(2);
  for (const auto& [begin, end, grain] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {0, 1, 1}, {0, 2, 1}, {3, 10, 1}, {0, 100, 7}, {-5, 5, 0}, {0, 1000, 64}, {0, 64, 64}}) {
    SCOPED_TRACE(testing::Message() << begin << ".." << end << " grain " << grain);
    const auto chunks = chunks_of(begin, end, grain);
    ASSERT_FALSE(chunks.empty());
    EXPECT_LE(chunks.size(), 2u);
    EXPECT_EQ(chunks.front().first, begin);
    EXPECT_EQ(chunks.back().second, end);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_LT(chunks[i].first, chunks[i].second);
      if (i + 1 < chunks.size()) {
        EXPECT_EQ(chunks[i].second, chunks[i + 1].first);
        EXPECT_GE(chunks[i].second - chunks[i].first, grain);
      }
    }
  }
  EXPECT_TRUE(chunks_of(4, 4, 1).empty());
  EXPECT_TRUE(chunks_of(5, 4, 1).empty());
}

TEST(KernelsParallelFor, RunsOnLibTorchsThreads) {
  const Threads threads(2);
  std::mutex mutex;
  std::set<std::thread::id> os_threads;
  std::set<int> torch_threads;
  bool all_in_region = true;
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    const std::lock_guard<std::mutex> lock(mutex);
    os_threads.insert(std::this_thread::get_id());
    torch_threads.insert(at::get_thread_num());
    all_in_region = all_in_region && at::in_parallel_region();
  });
  EXPECT_EQ(os_threads.size(), 2u);
  EXPECT_EQ(torch_threads, (std::set<int>{0, 1}));
  EXPECT_TRUE(all_in_region);  // LibTorch's runtime sees our region: ops inside stay serial
  EXPECT_FALSE(at::in_parallel_region());
}

TEST(KernelsParallelFor, IsSerialWhenNestedOrOnOneThread) {
  {
    const Threads threads(2);
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> inner;
    parallel_for(0, 2, 1, [&](int64_t b, int64_t) {
      if (b != 0) return;
      const std::thread::id outer = std::this_thread::get_id();
      parallel_for(0, 100, 1, [&](int64_t ib, int64_t ie) {
        const std::lock_guard<std::mutex> lock(mutex);
        EXPECT_EQ(std::this_thread::get_id(), outer);
        inner.emplace_back(ib, ie);
      });
    });
    EXPECT_EQ(inner, (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
  }
  const Threads one(1);
  EXPECT_EQ(chunks_of(0, 100, 1), (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
}

TEST(KernelsParallelFor, RethrowsAChunksExceptionInTheCaller) {
  const Threads threads(2);
  EXPECT_THROW(parallel_for(0, 10, 1,
                            [&](int64_t b, int64_t) {
                              if (b > 0) throw std::runtime_error("second chunk");
                            }),
               std::runtime_error);
  EXPECT_THROW(parallel_for(0, 1, 1, [&](int64_t, int64_t) { throw std::logic_error("serial"); }),
               std::logic_error);
}

}  // namespace
}  // namespace scaffold::kernels
