// End-to-end tests of `scaffold power`: the command's exit status comes back, signals sent to
// the wrapper reach the command, samples and energies are written (against the GH200 fixture
// tree, so the expected energy is known), and absent or unknown methods fail as documented.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "e2e/varying_power.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {

namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

const fs::path kFixtures = fs::path(SCAFFOLD_SOURCE_DIR) / "tests" / "fixtures" / "energy";

// Sampling only the fixture tree: no real sensor of the test machine changes the numbers.
std::string power_cmd(const fs::path& out, const std::string& rest) {
  return kBinary + " power --methods hwmon --hwmon-root " +
         (kFixtures / "gh200" / "hwmon").string() + " --out " + out.string() + " " + rest;
}

std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(core::read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> row;
    std::size_t begin = 0;
    for (;;) {
      const std::size_t comma = line.find(',', begin);
      row.push_back(
          line.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
    rows.push_back(row);
  }
  return rows;
}

std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(Power, ReturnsTheCommandsExitStatus) {
  TempDir dir;
  auto r = run_command(power_cmd(dir.path(), "-- false"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run_command(power_cmd(dir.path(), "-- sh -c 'exit 3'"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("exited with 3"), std::string::npos) << r.output;
  r = run_command(power_cmd(dir.path(), "-- true"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(power_cmd(dir.path(), "-- sh -c 'kill -KILL $$'"));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  r = run_command(power_cmd(dir.path(), "-- scaffold-test-no-such-command"));
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("cannot run 'scaffold-test-no-such-command'"), std::string::npos)
      << r.output;
}

TEST(Power, SleepWritesSamplesAndEnergiesOfTheFixtureNode) {
  TempDir dir;
  const auto r = run_command(power_cmd(dir.path() / "out", "-- sleep 0.5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto power = read_csv(dir.path() / "out" / "power.csv");
  ASSERT_GE(power.size(), 1u + 4u) << "at least 4 samples in 0.5 s at 100 ms";
  ASSERT_EQ(power[0].size(), 2u + 8u);
  EXPECT_EQ(power[0][0], "time_s");
  EXPECT_EQ(power[0][1], "unix_time_s");
  EXPECT_EQ(power[0][2], "hwmon:Module Power Socket 0 [W]");
  EXPECT_EQ(power[1][0], "0.0");
  EXPECT_EQ(power[1][2], "412.5");
  EXPECT_GE(std::stod(power.back()[0]), 0.5);

  const auto energy = read_csv(dir.path() / "out" / "energy.csv");
  ASSERT_EQ(energy.size(), 1u + 8u + 1u);
  const auto& h = energy[0];
  const auto& module0 = energy[1];
  EXPECT_EQ(module0[column(h, "sensor")], "hwmon:Module Power Socket 0");
  EXPECT_EQ(module0[column(h, "summed")], "True");
  EXPECT_EQ(energy[2][column(h, "summed")], "False");  // Grace: part of the module
  const double duration_s = std::stod(module0[column(h, "duration_s")]);
  const double module0_j = std::stod(module0[column(h, "energy_integrated_j")]);
  EXPECT_NEAR(duration_s, 0.5, 0.4);
  // Constant fixture power: energy = P x duration (duration rounded to the µs in the file).
  EXPECT_NEAR(module0_j, 412.5 * duration_s, 412.5 * 1e-6);
  EXPECT_NEAR(std::stod(module0[column(h, "energy_integrated_wh")]), module0_j / 3600.0, 1e-12);
  EXPECT_EQ(module0[column(h, "energy_counter_j")], "");
  const auto& total = energy.back();
  EXPECT_EQ(total[0], "total");
  EXPECT_NEAR(std::stod(total[column(h, "energy_j")]), (412.5 + 398.0) * duration_s, 811.0 * 1e-6);
  EXPECT_EQ(total[column(h, "energy_from")], "integrated");
  EXPECT_NE(r.output.find("total over 2 sensors (integrated)"), std::string::npos) << r.output;
}

// A power that changes over time (varying_power.hpp, on the system clock so that power.csv's
// unix_time_s places each sample on it): every sample holds P at its time, and the energy is the
// closed-form integral of P between the first and the last sample, not P times the duration.
// Tolerance 20 W x duration for the energy (linear interpolation between 100 ms samples: at
// most h^2/8 * A * w^2 = 0.5 W at h = 100 ms, 4.2 W at 300 ms; the fixture's lag: 11.8 W at
// 50 ms), 30 W for one sample (the lag alone, up to 127 ms). P spans at least 150 W over the
// 2.2 s run (more than half the 4 s period), so a constant fails.
TEST(Power, EnergyOfAPowerVaryingOverTimeIsItsIntegral) {
  TempDir dir;
  test::VaryingPowerFixture power(dir.path() / "fixture", 300.0, 150.0, 4.0,
                                  test::PowerClock::system);
  const auto r =
      run_command(kBinary + " power --methods hwmon --hwmon-root " + power.hwmon_root().string() +
                  " --out " + (dir.path() / "out").string() + " -- sleep 2.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto samples = read_csv(dir.path() / "out" / "power.csv");
  ASSERT_GE(samples.size(), 1u + 10u) << "at least 10 samples in 2.2 s at 100 ms";
  ASSERT_EQ(samples[0].size(), 3u);
  EXPECT_EQ(samples[0][2], "hwmon:Module Power Socket 0 [W]");
  double lowest_w = 1e9, highest_w = 0;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const double t = std::stod(samples[i][1]), p = power.power_w(t);
    EXPECT_NEAR(std::stod(samples[i][2]), p, 30.0)
        << "sample " << i << " at unix time " << samples[i][1];
    lowest_w = std::min(lowest_w, p);
    highest_w = std::max(highest_w, p);
  }
  ASSERT_GT(highest_w - lowest_w, 100.0) << "the run must see the power change";
  const double t0 = std::stod(samples[1][1]), t1 = std::stod(samples.back()[1]);
  const double ref_j = power.energy_j(t0, t1);

  const auto energy = read_csv(dir.path() / "out" / "energy.csv");
  ASSERT_EQ(energy.size(), 1u + 1u + 1u);
  const auto& h = energy[0];
  const auto& module0 = energy[1];
  const double duration_s = std::stod(module0[column(h, "duration_s")]);
  // duration_s is on the steady clock, the samples' times on the system clock, which NTP may slew
  // while the run lasts (0.5 % measured on a VM whose clock had just been stepped): 1 % of the
  // span, still a fifth of one 100 ms sample interval missing from the span.
  EXPECT_NEAR(duration_s, t1 - t0, 1e-3 + 0.01 * (t1 - t0)) << "the span of the samples";
  EXPECT_NEAR(std::stod(module0[column(h, "energy_integrated_j")]), ref_j, 20.0 * duration_s);
  EXPECT_NEAR(std::stod(module0[column(h, "power_avg_w")]), ref_j / duration_s, 20.0);
  EXPECT_NEAR(std::stod(module0[column(h, "power_peak_w")]), power.peak_w(t0, t1), 20.0);
  EXPECT_NEAR(std::stod(energy.back()[column(h, "energy_j")]), ref_j, 20.0 * duration_s)
      << "the total";
}

TEST(Power, SigtermToTheWrapperReachesTheCommand) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", got = dir.path() / "got";
  const std::string script = "trap 'echo term > " + got.string() +
                             "; kill $s 2>/dev/null; exit 7' TERM; sleep 30 & s=$!; echo ready > " +
                             ready.string() + "; wait $s";
  const std::vector<std::string> args = {"power",
                                         "--methods",
                                         "hwmon",
                                         "--hwmon-root",
                                         (kFixtures / "gh200" / "hwmon").string(),
                                         "--out",
                                         (dir.path() / "out").string(),
                                         "--",
                                         "sh",
                                         "-c",
                                         script};
  const pid_t pid = test::spawn_scaffold(args);
  ASSERT_GE(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(ready) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(ready));
  const auto sent = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_TRUE(WIFEXITED(status)) << "the wrapper must survive the signal and exit normally";
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_TRUE(fs::exists(got));
  EXPECT_LT(waited_s, 10.0);
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "energy.csv")) << "files are still written";
}

// Running (not a zombie waiting for its parent to reap it): /proc/<pid>/stat's state field.
bool process_running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' &&
         text[close + 2] != 'X';
}

// SIGKILL cannot be caught or forwarded: the command gets SIGTERM from the kernel
// (PR_SET_PDEATHSIG) instead of running on unmeasured (issue 16, item 11).
TEST(Power, SigkillToTheWrapperEndsTheCommand) {
  TempDir dir;
  const fs::path pid_file = dir.path() / "pid";
  const std::vector<std::string> args = {"power",
                                         "--methods",
                                         "hwmon",
                                         "--hwmon-root",
                                         (kFixtures / "gh200" / "hwmon").string(),
                                         "--out",
                                         (dir.path() / "out").string(),
                                         "--",
                                         "sh",
                                         "-c",
                                         "echo $$ > " + pid_file.string() + ".tmp && mv " +
                                             pid_file.string() + ".tmp " + pid_file.string() +
                                             " && exec sleep 60"};
  const pid_t wrapper = test::spawn_scaffold(args);
  ASSERT_GE(wrapper, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(pid_file) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(pid_file));
  const pid_t command = static_cast<pid_t>(std::stol(core::read_file(pid_file)));
  ASSERT_TRUE(process_running(command));
  ::kill(wrapper, SIGKILL);
  ::waitpid(wrapper, nullptr, 0);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (process_running(command) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool still = process_running(command);
  if (still) ::kill(command, SIGKILL);
  EXPECT_FALSE(still) << "the command outlived its SIGKILLed wrapper by 10 s";
}

TEST(Power, TheCommandGetsTheEnvironmentScaffoldWasStartedWith) {
  // Not the variables MPI_Init sets in scaffold itself (a wrapped MPI program would take
  // itself for part of scaffold's singleton job).
  TempDir dir;
  const auto r = run_command("SCAFFOLD_TEST_VAR=kept " +
                             power_cmd(dir.path(),
                                       "-- sh -c 'test \"$SCAFFOLD_TEST_VAR\" = kept && "
                                       "test -z \"$OMPI_MCA_ess_singleton_isolated\" && "
                                       "test -z \"$OMPI_MCA_orte_top_session_dir\"'"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Power, UnknownOrAbsentMethodsFailBeforeRunningTheCommand) {
  TempDir dir;
  const fs::path marker = dir.path() / "ran";
  auto r = run_command(kBinary + " power --methods nvml,gpu -- touch " + marker.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'gpu'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nvml, rocm, hwmon, rapl"), std::string::npos) << r.output;
  r = run_command(kBinary + " power --methods rapl --powercap-root /nonexistent-powercap --out " +
                  dir.path().string() + " -- touch " + marker.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("power method 'rapl' is not available"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/nonexistent-powercap"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(marker));
  r = run_command(kBinary + " power --interval 0 -- true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_command(kBinary + " power");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(Power, WithoutAnySensorTheCommandStillRunsAndFilesAreWritten) {
  TempDir dir;
  // auto may still find NVML or ROCm SMI on a GPU machine; it must run the command either way.
  const auto r = run_command(
      kBinary +
      " power --hwmon-root /nonexistent-hwmon --powercap-root /nonexistent-powercap --out " +
      dir.path().string() + " -- sh -c 'exit 0'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() / "power.csv"));
  EXPECT_TRUE(fs::exists(dir.path() / "energy.csv"));
  if (r.output.find("no power sensors found") != std::string::npos) {
    EXPECT_NE(r.output.find("hwmon: no hwmon power sensor: /nonexistent-hwmon"), std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace scaffold
