// The MPI communicator and failure consensus, run under mpiexec (see tests/mpi/CMakeLists.txt):
// collectives deliver the right bytes, and one failing rank makes every rank throw.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/parallel_layout.hpp"
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
  for (int r = 0; r < comm.size(); ++r)
    EXPECT_EQ(all[r], std::string(static_cast<std::size_t>(r) * 3, 'x'));

  int64_t sum[2] = {comm.rank(), 1};
  comm.allreduce_sum(sum, 2);
  EXPECT_EQ(sum[0], comm.size() * (comm.size() - 1) / 2);
  EXPECT_EQ(sum[1], comm.size());
  double mx = comm.rank();
  comm.allreduce_max(&mx, 1);
  EXPECT_EQ(mx, comm.size() - 1);
}

// The world ranks a communicator holds, in its rank order.
std::vector<int> world_ranks_of(Communicator& c) {
  std::vector<int> ranks;
  for (const std::string& r : c.allgather(std::to_string(test::world().rank())))
    ranks.push_back(std::stoi(r));
  return ranks;
}

// For every group size that divides the world: the group holds ranks replica x g .. + g - 1 in
// order, and the peers hold group_rank, g + group_rank, ... (docs/distributed.md's numbering,
// written out here), each in its own rank order.
TEST(Dist, ParallelLayoutSplitsGroupsAndReplicasByTheDocumentedNumbering) {
  Communicator& world = test::world();
  const int n = world.size(), rank = world.rank();
  for (int g = 1; g <= n; ++g) {
    if (n % g != 0) continue;
    const ParallelLayout layout(world, g);
    EXPECT_EQ(layout.group_size(), g);
    EXPECT_EQ(layout.replicas(), n / g);
    EXPECT_EQ(layout.replica(), rank / g);
    EXPECT_EQ(layout.group_rank(), rank % g);
    std::vector<int> group, peers;
    for (int i = 0; i < g; ++i) group.push_back((rank / g) * g + i);
    for (int r = 0; r < n / g; ++r) peers.push_back(r * g + rank % g);
    EXPECT_EQ(world_ranks_of(layout.group()), group) << "group size " << g;
    EXPECT_EQ(world_ranks_of(layout.replica_peers()), peers) << "group size " << g;
    EXPECT_EQ(layout.group().rank(), rank % g);
    EXPECT_EQ(layout.replica_peers().rank(), rank / g);
  }
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
    // Every rank said it: the message as it is, once, without a list of ranks.
    EXPECT_EQ(std::string(e.what()), "bad config");
  }
}

TEST(Dist, RanksFailingAlikeAreNamedAsRanges) {
  Communicator& comm = test::world();
  if (comm.size() < 4) GTEST_SKIP() << "needs 4 ranks";
  try {
    // Ranks 0, 1 and 3 fail alike, rank 2 differently.
    agree(comm, comm.rank() == 2 ? "out of memory" : "bad shard file");
    FAIL();
  } catch (const AgreedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks 0-1,3: bad shard file"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 2: out of memory"), std::string::npos) << what;
  }
}

// Sub-communicators: collectives stay inside each group, ranks ordered by key.
TEST(Dist, SplitFormsIndependentGroups) {
  Communicator& comm = test::world();
  const int color = comm.rank() % 2;
  const auto group = comm.split(color, -comm.rank());  // reversed order inside each group
  int64_t members = 1, rank_sum = comm.rank();
  group->allreduce_sum(&members, 1);
  group->allreduce_sum(&rank_sum, 1);
  const int64_t expected_members = (comm.size() + 1 - color) / 2;
  EXPECT_EQ(members, expected_members);
  int64_t expected_sum = 0;
  for (int r = color; r < comm.size(); r += 2) expected_sum += r;
  EXPECT_EQ(rank_sum, expected_sum);
  // Key -rank: the highest world rank of the group is its rank 0.
  std::string top = group->rank() == 0 ? std::to_string(comm.rank()) : std::string();
  group->broadcast(top, 0);
  int highest = color;
  while (highest + 2 < comm.size()) highest += 2;
  EXPECT_EQ(top, std::to_string(highest));
}

// Non-blocking point-to-point and all-reduce on raw buffers: a ring exchange.
TEST(Dist, NonBlockingRingAndAllreduce) {
  Communicator& comm = test::world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (comm.rank() + 1) % comm.size(),
            prev = (comm.rank() + comm.size() - 1) % comm.size();
  std::vector<float> out(1000, static_cast<float>(comm.rank())), in(1000, -1.0f);
  auto r = comm.irecv(in.data(), in.size() * sizeof(float), prev, 7);
  auto s = comm.isend(out.data(), out.size() * sizeof(float), next, 7);
  std::vector<double> sum(3, static_cast<double>(comm.rank() + 1));
  auto a = comm.iallreduce_sum(sum.data(), sum.size(), DataType::Float64);
  r->wait();
  s->wait();
  // test() alone drives the all-reduce to completion (bounded, so a bug fails instead of hanging).
  bool done = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && std::chrono::steady_clock::now() < give_up) done = a->test();
  EXPECT_TRUE(done);
  a->wait();
  EXPECT_TRUE(a->test() && r->test());  // completed requests stay completed
  EXPECT_EQ(in.front(), static_cast<float>(prev));
  EXPECT_EQ(in.back(), static_cast<float>(prev));
  const double n = comm.size();
  EXPECT_EQ(sum[2], n * (n + 1) / 2);
}

}  // namespace
}  // namespace scaffold::dist
