// Energy under MPI: with every rank on one node, only the node's lowest rank samples, so a window's
// energy is the node's power x duration once, not once per rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/energy_meter.hpp"
#include "core/fs.hpp"
#include "core/timer.hpp"
#include "mpi_test_main.hpp"

namespace scaffold::cli {
namespace {

TEST(EnergyMeterMpi, OneSamplerPerNodeAndNoDoubleCounting) {
  dist::Communicator& comm = test::world();
  // The GH200 fixture: 412.5 + 398.0 W of module power on this "node".
  ::setenv("SCAFFOLD_HWMON_ROOT", SCAFFOLD_SOURCE_DIR "/tests/fixtures/energy/gh200/hwmon", 1);
  ::setenv("SCAFFOLD_POWERCAP_ROOT", "/nonexistent", 1);
  std::string dir = comm.rank() == 0 ? std::string("/tmp/scaffold-energy-mpi-") + std::to_string(::getpid()) : "";
  comm.broadcast(dir, 0);
  if (comm.rank() == 0) core::create_directories(dir);
  comm.barrier();
  {
    EnergyMeter meter(comm);
    ASSERT_TRUE(meter.active());
    const double t0 = core::monotonic_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const double t1 = core::monotonic_s();
    meter.add_window("train", 1, t0, t1);
    const auto rows = meter.finish(dir, 1);
    if (comm.rank() == 0) {
      ASSERT_EQ(rows.size(), 1u);
      EXPECT_NEAR(rows[0].energy_j, 810.5 * (t1 - t0), 1e-6 * rows[0].energy_j)
          << "a window counted once per node, whatever the ranks on it";
      EXPECT_NEAR(rows[0].avg_power_w, 810.5, 1e-6);
      EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::path(dir) / "energy_stats.csv"));
    } else {
      EXPECT_TRUE(rows.empty());
    }
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scaffold::cli
