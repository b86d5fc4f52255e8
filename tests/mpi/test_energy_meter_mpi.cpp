// Energy under MPI: with every rank on one node, only the node's lowest rank samples, so a window's
// energy is the node's power x duration once, not once per rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/fs.hpp"
#include "core/timer.hpp"
#include "energy/meter.hpp"
#include "mpi_test_main.hpp"

namespace scaffold::energy {
namespace {

TEST(EnergyMeterMpi, OneSamplerPerNodeAndNoDoubleCounting) {
  dist::Communicator& comm = test::world();
  // The GH200 fixture: 412.5 + 398.0 W of module power on this "node".
  ::setenv("SCAFFOLD_HWMON_ROOT", SCAFFOLD_SOURCE_DIR "/tests/fixtures/energy/gh200/hwmon", 1);
  ::setenv("SCAFFOLD_POWERCAP_ROOT", "/nonexistent", 1);
  std::string dir =
      comm.rank() == 0 ? std::string("/tmp/scaffold-energy-mpi-") + std::to_string(::getpid()) : "";
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
      EXPECT_TRUE(
          std::filesystem::is_regular_file(std::filesystem::path(dir) / "energy_stats.csv"));
    } else {
      EXPECT_TRUE(rows.empty());
    }
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

// One 300 ms window measured with SCAFFOLD_POWER_METHODS set to `methods`, with the GH200 hwmon
// fixture (810.5 W of module power) and the RAPL fixture (counters standing still: 0 W) both
// present. Returns the window's mean power on rank 0 (0 elsewhere), -1 when the meter is inactive.
double window_power_with_methods(const char* methods) {
  dist::Communicator& comm = test::world();
  ::setenv("SCAFFOLD_HWMON_ROOT", SCAFFOLD_SOURCE_DIR "/tests/fixtures/energy/gh200/hwmon", 1);
  ::setenv("SCAFFOLD_POWERCAP_ROOT", SCAFFOLD_SOURCE_DIR "/tests/fixtures/energy/powercap", 1);
  ::setenv("SCAFFOLD_POWER_METHODS", methods, 1);
  std::string dir = comm.rank() == 0
                        ? std::string("/tmp/scaffold-energy-methods-") + std::to_string(::getpid())
                        : "";
  comm.broadcast(dir, 0);
  if (comm.rank() == 0) core::create_directories(dir);
  comm.barrier();
  double power = -1.0;
  {
    EnergyMeter meter(comm);
    if (meter.active()) {
      const double t0 = core::monotonic_s();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const double t1 = core::monotonic_s();
      meter.add_window("train", 1, t0, t1);
      const auto rows = meter.finish(dir, 1);
      power = comm.rank() == 0 && rows.size() == 1 ? rows[0].energy_j / (t1 - t0) : 0.0;
    }
  }
  ::unsetenv("SCAFFOLD_POWER_METHODS");
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  return power;
}

// A system's power_methods (jube/systems.yaml) reach the meter as SCAFFOLD_POWER_METHODS: only the
// named methods are opened, whatever else the node has.
TEST(EnergyMeterMpi, PowerMethodsFromTheEnvironment) {
  const bool root = test::world().rank() == 0;
  const double hwmon = window_power_with_methods("hwmon");
  if (root) {
    EXPECT_NEAR(hwmon, 810.5, 1e-6) << "hwmon alone: the two module sensors";
  }
  const double rapl = window_power_with_methods("rapl");
  if (root) {
    EXPECT_NEAR(rapl, 0.0, 1e-9) << "rapl alone: the standing counters, no hwmon sensor";
  }
  const double both = window_power_with_methods("rapl,hwmon");
  if (root) {
    EXPECT_NEAR(both, 810.5, 1e-6);
  }
  // A name scaffold does not know: a warning on every node, no energy, and no hang.
  EXPECT_LT(window_power_with_methods("no-such-method"), 0.0);
}

}  // namespace
}  // namespace scaffold::energy
