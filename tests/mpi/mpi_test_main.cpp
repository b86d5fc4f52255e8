#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

namespace scaffold::test {
namespace {
dist::Communicator* g_world = nullptr;
}  // namespace

dist::Communicator& world() { return *g_world; }

}  // namespace scaffold::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  scaffold::dist::Runtime runtime(&argc, &argv);
  scaffold::test::g_world = &runtime.world();
  // Only rank 0 prints gtest's report; every rank's result decides the exit code.
  if (runtime.world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int64_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  runtime.world().allreduce_sum(&failed, 1);
  return failed != 0 ? 1 : 0;
}
