// The MPI communicator and failure consensus, run under mpiexec (see tests/mpi/CMakeLists.txt):
// collectives deliver the right bytes, and one failing rank makes every rank throw.
#include <gtest/gtest.h>

#include <string>

#include "dist/communicator.hpp"
#include "mpi_test_main.hpp"

namespace scaffold::dist {
namespace {


TEST(Dist, BroadcastAndAllgatherDeliverEveryRanksBytes) {
  Communicator& comm = test::world();
  std::string text = comm.rank() == 0 ? std::string("from rank 0\0with a NUL", 22) : "junk";
  comm.broadcast(text, 0);
  EXPECT_EQ(text, std::string("from rank 0\0with a NUL", 22));

  const auto all = comm.allgather(std::string(static_cast<std::size_t>(comm.rank()) * 3, 'x'));
  ASSERT_EQ(static_cast<int>(all.size()), comm.size());
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[r], std::string(static_cast<std::size_t>(r) * 3, 'x'));

  int64_t sum[2] = {comm.rank(), 1};
  comm.allreduce_sum(sum, 2);
  EXPECT_EQ(sum[0], comm.size() * (comm.size() - 1) / 2);
  EXPECT_EQ(sum[1], comm.size());
  double mx = comm.rank();
  comm.allreduce_max(&mx, 1);
  EXPECT_EQ(mx, comm.size() - 1);
}

TEST(Dist, NodeLocalViewCountsEachNodeOnce) {
  Communicator& comm = test::world();
  // mpiexec on this machine puts every rank on one node.
  EXPECT_EQ(comm.nodes(), 1);
  EXPECT_EQ(comm.local_size(), comm.size());
  EXPECT_EQ(comm.local_rank(), comm.rank());
  int64_t leaders = comm.local_rank() == 0 ? 1 : 0;
  comm.allreduce_sum(&leaders, 1);
  EXPECT_EQ(leaders, comm.nodes());
}

TEST(Dist, OneFailingRankMakesEveryRankThrow) {
  Communicator& comm = test::world();
  const int bad = comm.size() - 1;
  try {
    run_agreed(comm, [&] {
      if (comm.rank() == bad) throw std::runtime_error("disk full on the last rank");
    });
    FAIL() << "rank " << comm.rank() << " did not learn of the failure";
  } catch (const AgreedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("disk full on the last rank"), std::string::npos) << what;
    if (comm.size() > 1) {
      EXPECT_NE(what.find("rank " + std::to_string(bad)), std::string::npos) << what;
    }
  }
  EXPECT_NO_THROW(agree(comm, ""));
}

TEST(Dist, IdenticalErrorsAreReportedOnce) {
  Communicator& comm = test::world();
  try {
    agree(comm, "bad config");
    FAIL();
  } catch (const AgreedError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("bad config"), what.rfind("bad config")) << what;
  }
}

}  // namespace
}  // namespace scaffold::dist
