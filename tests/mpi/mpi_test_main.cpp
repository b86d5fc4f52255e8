#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace scaffold::test {
namespace {
dist::Communicator* g_world = nullptr;

// On ranks other than 0, gtest's report is silenced; failures are still printed, with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  // (gtest holds its own lock here: no UnitTest queries.)
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: failure\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

dist::Communicator& world() {
  return *g_world;
}

}  // namespace scaffold::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  scaffold::dist::Runtime runtime(&argc, &argv);
  scaffold::test::g_world = &runtime.world();
  // Only rank 0 prints gtest's report; every rank's result decides the exit code.
  if (runtime.world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new scaffold::test::RankFailurePrinter(runtime.world().rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  runtime.world().allreduce_sum(&failed, 1);
  return failed != 0 ? 1 : 0;
}
