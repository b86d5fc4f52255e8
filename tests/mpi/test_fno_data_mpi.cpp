// FNO data generation under several ranks: the dataset P ranks make is byte-identical to the one
// a single rank makes (each rank's share of the samples, the statistics and the digest combined
// in sample order), an interrupted P-rank generation resumes to the same bytes, and a solver
// failure on the rank that owns a sample ends every rank with the same error instead of a hang, and
// so does a reused file edited in another rank's block of the check.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "dist/communicator.hpp"
#include "mpi_test_main.hpp"
#include "unit/workloads/fno/fno_data_fixtures.hpp"
#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/generate.hpp"

namespace scaffold::fno {
namespace {

namespace fs = std::filesystem;

class FnoDataMpi : public ::testing::TestWithParam<FnoProblem> {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    dist::Communicator& comm = scaffold::test::world();
    std::string root;
    if (comm.rank() == 0)
      root = (fs::temp_directory_path() / ("scaffold-fno-data-mpi-" + std::to_string(::getpid()) +
                                           "-" + std::to_string(std::random_device{}())))
                 .string();
    comm.broadcast(root, 0);
    root_ = root;
  }
  void TearDown() override {
    scaffold::test::world().barrier();
    std::error_code ec;
    if (scaffold::test::world().rank() == 0) fs::remove_all(root_, ec);
  }
  // More samples than ranks, so every rank of a 4-rank run generates some.
  FnoDataOptions options(const std::string& sub) const {
    FnoDataOptions o = test::tiny_options(GetParam(), root_ / sub);
    o.burgers.train_samples = o.navier_stokes.train_samples = 7;
    o.rayleigh_benard.train_samples = 5;
    return o;
  }
  fs::path root_;
};

TEST_P(FnoDataMpi, RanksMakeTheBytesOneRankMakes) {
  dist::Communicator& world = scaffold::test::world();
  const FnoDatasetInfo shared = ensure_fno_dataset(world, options("ranks"));
  EXPECT_EQ(shared.samples_generated, shared.samples_total);
  // Rank 0 alone, on a communicator of its own, into another folder.
  const auto alone = world.split(world.rank(), 0);
  std::string serial_root, digest;
  if (world.rank() == 0) {
    const FnoDatasetInfo single = ensure_fno_dataset(*alone, options("single"));
    serial_root = single.root.string();
    digest = single.meta.dataset_sha256;
    EXPECT_EQ(test::snapshot(single.root), test::snapshot(shared.root))
        << world.size() << " ranks vs 1";
    EXPECT_EQ(single.meta.input_stats.mean, shared.meta.input_stats.mean);
    EXPECT_EQ(single.meta.target_stats.std, shared.meta.target_stats.std);
  }
  world.broadcast(digest, 0);
  EXPECT_EQ(shared.meta.dataset_sha256, digest) << "every rank reports the same digest";
}

TEST_P(FnoDataMpi, AnInterruptedRunResumesAcrossRanks) {
  dist::Communicator& world = scaffold::test::world();
  const FnoDataOptions o = options("resume");
  const FnoDatasetInfo first = ensure_fno_dataset(world, o);
  std::string reference_digest = first.meta.dataset_sha256;
  const FnoDataPaths paths = data_paths(o);
  if (world.rank() == 0) {
    fs::rename(paths.root, paths.partial);
    fs::remove(paths.partial / "meta.json");
    const ProblemLayout layout = problem_layout(o);
    for (int64_t i : {0, 3, 4})
      fs::remove(sample_path(paths.partial, FnoSplit::Train, i, layout.files[0].name));
  }
  world.barrier();
  const FnoDatasetInfo resumed = ensure_fno_dataset(world, o);
  EXPECT_EQ(resumed.samples_generated, 3);
  EXPECT_EQ(resumed.meta.dataset_sha256, reference_digest);
}

INSTANTIATE_TEST_SUITE_P(Problems, FnoDataMpi,
                         ::testing::Values(FnoProblem::Burgers, FnoProblem::NavierStokes,
                                           FnoProblem::RayleighBenard),
                         [](const auto& p) { return std::string(problem_name(p.param)); });

TEST(FnoDataMpiFailures, AFailingSampleEndsEveryRankWithTheSameError) {
  at::set_num_threads(1);
  dist::Communicator& world = scaffold::test::world();
  std::string root;
  if (world.rank() == 0)
    root =
        (fs::temp_directory_path() / ("scaffold-fno-data-mpi-fail-" + std::to_string(::getpid())))
            .string();
  world.broadcast(root, 0);
  FnoDataOptions o = test::tiny_options(FnoProblem::NavierStokes, root);
  o.navier_stokes.grf.scale = 1e7;  // blows up at this step: every sample fails, on whichever rank
  o.navier_stokes.dt = 0.1;
  o.navier_stokes.viscosity = 1e-5;
  std::string message;
  try {
    ensure_fno_dataset(world, o);
  } catch (const dist::AgreedError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("ns_dt"), std::string::npos) << message;
  std::string rank0 = message;
  world.broadcast(rank0, 0);
  EXPECT_EQ(message, rank0) << "the same error on every rank";
  world.barrier();
  std::error_code ec;
  if (world.rank() == 0) fs::remove_all(root, ec);
}

TEST(FnoDataMpiFailures, AFileEditedInAnotherRanksBlockIsRefusedOnEveryRank) {
  at::set_num_threads(1);
  dist::Communicator& world = scaffold::test::world();
  std::string root;
  if (world.rank() == 0)
    root =
        (fs::temp_directory_path() / ("scaffold-fno-data-mpi-edit-" + std::to_string(::getpid())))
            .string();
  world.broadcast(root, 0);
  FnoDataOptions o = test::tiny_options(FnoProblem::Burgers, root);
  o.burgers.train_samples = 7;  // 9 samples: the last is in rank 1's block (2 ranks), 2's (4)
  const FnoDatasetInfo info = ensure_fno_dataset(world, o);
  if (world.rank() == 0) {  // the last float of the last sample: same size, finite
    std::fstream f(sample_path(info.root, FnoSplit::Val, 1, "target"),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const float value = 0.75f;
    f.write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  world.barrier();
  std::string message;
  try {
    ensure_fno_dataset(world, o);
  } catch (const dist::AgreedError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("val/000001_target.npy"), std::string::npos) << message;
  std::string rank0 = message;
  world.broadcast(rank0, 0);
  EXPECT_EQ(message, rank0) << "the same error on every rank";
  world.barrier();
  std::error_code ec;
  if (world.rank() == 0) fs::remove_all(root, ec);
}

}  // namespace
}  // namespace scaffold::fno
