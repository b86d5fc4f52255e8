// The sysfs sources against fixture trees (GH200 hwmon, generic hwmon, powercap/RAPL), method
// parsing and selection (auto vs explicit), and the power.csv/energy.csv text line by line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/fs.hpp"
#include "energy/output.hpp"
#include "energy/sources.hpp"
#include "energy/sysfs.hpp"
#include "test_util.hpp"
#include "unit/energy/energy_test_util.hpp"

namespace scaffold::energy {
namespace {

namespace fs = std::filesystem;
using test::close;

const fs::path kFixtures = fs::path(SCAFFOLD_SOURCE_DIR) / "tests" / "fixtures" / "energy";

std::vector<SensorReading> read_once(PowerSource& source, std::size_t n) {
  std::vector<SensorReading> r(n);
  source.sample(r);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(HwmonSource, FindsTheGh200SensorsInNumericOrderWithKinds) {
  auto source = make_hwmon_source({kFixtures / "gh200" / "hwmon"});
  const auto sensors = source->init();
  const std::vector<std::pair<std::string, SensorKind>> want = {
      {"hwmon:Module Power Socket 0", SensorKind::Module},
      {"hwmon:Grace Power Socket 0", SensorKind::CpuPackage},
      {"hwmon:CPU Power Socket 0", SensorKind::Part},
      {"hwmon:SysIO Power Socket 0", SensorKind::Part},
      {"hwmon:Module Power Socket 1", SensorKind::Module},
      {"hwmon:Grace Power Socket 1", SensorKind::CpuPackage},
      {"hwmon:CPU Power Socket 1", SensorKind::Part},
      {"hwmon:SysIO Power Socket 1", SensorKind::Part}};
  ASSERT_EQ(sensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(sensors[i].name, want[i].first) << i;
    EXPECT_EQ(sensors[i].kind, want[i].second) << i;
    EXPECT_EQ(sensors[i].source, "hwmon");
    EXPECT_FALSE(sensors[i].has_counter);
  }
  EXPECT_NE(sensors[0].detail.find("hwmon2/device/power1_average"), std::string::npos)
      << sensors[0].detail;
  const auto r = read_once(*source, sensors.size());
  const double want_w[] = {412.5, 95.25, 60.0, 20.0, 398.0, 90.0, 55.5, 19.0};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(close(sensors[i].name + " W", r[i].power_w, want_w[i], 1e-9));
    EXPECT_TRUE(std::isnan(r[i].counter_j));
  }
}

TEST(HwmonSource, GenericSensorsPreferInstantPowerAndUseLabels) {
  auto source = make_hwmon_source({kFixtures / "generic" / "hwmon"});
  const auto sensors = source->init();
  ASSERT_EQ(sensors.size(), 2u);
  EXPECT_EQ(sensors[0].name, "hwmon:amdgpu/PPT");
  EXPECT_EQ(sensors[1].name, "hwmon:amdgpu/power2");
  EXPECT_EQ(sensors[0].kind, SensorKind::Other);
  const auto r = read_once(*source, 2);
  EXPECT_TRUE(close("power1_input W", r[0].power_w, 36.0, 1e-12));
  EXPECT_TRUE(close("power2_average W", r[1].power_w, 12.5, 1e-12));
}

TEST(HwmonSource, AReadFailureIsNaNAndAbsenceNamesWhatWasLookedFor) {
  scaffold::test::TempDir tmp;
  fs::copy(kFixtures / "gh200", tmp.path(), fs::copy_options::recursive);
  auto source = make_hwmon_source({tmp.path() / "hwmon"});
  const auto sensors = source->init();
  fs::remove(tmp.path() / "hwmon" / "hwmon3" / "device" / "power1_average");
  const auto r = read_once(*source, sensors.size());
  EXPECT_TRUE(std::isnan(r[1].power_w));
  EXPECT_FALSE(std::isnan(r[0].power_w));

  try {
    make_hwmon_source({tmp.path() / "missing"})->init();
    ADD_FAILURE() << "a missing root must throw";
  } catch (const SourceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find((tmp.path() / "missing").string()), std::string::npos)
        << e.what();
  }
  fs::create_directories(tmp.path() / "empty" / "hwmon0");
  try {
    make_hwmon_source({tmp.path() / "empty"})->init();
    ADD_FAILURE() << "a tree without power sensors must throw";
  } catch (const SourceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("power*_input"), std::string::npos) << e.what();
  }
}

TEST(PowercapSource, FindsPackagesAndSubDomainsAndSkipsMmio) {
  auto source = make_powercap_source({kFixtures / "powercap"});
  const auto sensors = source->init();
  const std::vector<std::pair<std::string, SensorKind>> want = {
      {"rapl:package-0", SensorKind::CpuPackage}, {"rapl:package-0/core", SensorKind::Part},
      {"rapl:package-0/dram", SensorKind::Part},  {"rapl:package-1", SensorKind::CpuPackage},
      {"rapl:package-1/dram", SensorKind::Part},  {"rapl:psys", SensorKind::Other}};
  ASSERT_EQ(sensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(sensors[i].name, want[i].first) << i;
    EXPECT_EQ(sensors[i].kind, want[i].second) << i;
    EXPECT_TRUE(sensors[i].has_counter);
    EXPECT_TRUE(sensors[i].power_from_counter);
  }
  EXPECT_TRUE(close("package range J", sensors[0].counter_range_j, 262143.32885, 1e-9));
  EXPECT_TRUE(close("dram range J", sensors[2].counter_range_j, 65712.999613, 1e-9));
  const auto r = read_once(*source, sensors.size());
  EXPECT_TRUE(close("package-0 raw J", r[0].counter_j, 262000.0, 1e-9));
  EXPECT_TRUE(std::isnan(r[0].power_w));
}

TEST(PowercapSource, UnreadableCountersAreReported) {
  // energy_uj is root-only since Linux 5.10. A directory in its place is unreadable even for
  // root, who reads files whatever their mode.
  scaffold::test::TempDir tmp;
  fs::copy(kFixtures / "powercap", tmp.path(), fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    if (!fs::exists(e.path() / "energy_uj")) continue;
    fs::remove(e.path() / "energy_uj");
    fs::create_directory(e.path() / "energy_uj");
  }
  try {
    make_powercap_source({tmp.path()})->init();
    ADD_FAILURE() << "must throw";
  } catch (const SourceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("found 6 RAPL domains"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none has a readable energy_uj"), std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------------------------------------ methods

TEST(Methods, ParseAutoListsAndRejectUnknownNamesWithTheChoices) {
  EXPECT_TRUE(parse_methods("auto").empty());
  EXPECT_EQ(parse_methods("nvml,rapl,nvml"), (std::vector<Method>{Method::Nvml, Method::Rapl}));
  EXPECT_EQ(parse_methods("hwmon"), (std::vector<Method>{Method::Hwmon}));
  for (const char* bad : {"nvml,gpu", "", "nvml,", "AUTO"}) {
    try {
      parse_methods(bad);
      ADD_FAILURE() << "'" << bad << "' must be refused";
    } catch (const core::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("nvml, rocm, hwmon, rapl"), std::string::npos)
          << e.what();
    }
  }
}

SourceOptions fixture_options(const fs::path& hwmon_root, const fs::path& powercap_root) {
  SourceOptions o;
  o.hwmon.root = hwmon_root;
  o.powercap.root = powercap_root;
  o.nvml.libraries = {"libscaffold-test-no-such-nvml.so"};
  o.rocm.libraries = {"libscaffold-test-no-such-rocm-smi.so"};
  return o;
}

TEST(Methods, AutoOpensWhatIsPresentAndSaysWhatIsNot) {
  const auto opened =
      open_sources(fixture_options(kFixtures / "gh200" / "hwmon", kFixtures / "powercap"));
  ASSERT_EQ(opened.sources.size(), 2u);
  EXPECT_EQ(opened.sources[0].source->method(), "hwmon");
  EXPECT_EQ(opened.sources[1].source->method(), "rapl");
  ASSERT_EQ(opened.absent.size(), 2u);
  EXPECT_EQ(opened.absent[0].rfind("nvml: ", 0), 0u) << opened.absent[0];
  EXPECT_NE(opened.absent[0].find("libscaffold-test-no-such-nvml.so"), std::string::npos)
      << opened.absent[0];
  EXPECT_EQ(opened.absent[1].rfind("rocm: ", 0), 0u) << opened.absent[1];

  const auto none = open_sources(fixture_options("/nonexistent-hwmon", "/nonexistent-powercap"));
  EXPECT_TRUE(none.sources.empty());
  EXPECT_EQ(none.absent.size(), 4u);
}

TEST(Methods, AnExplicitlyRequestedAbsentMethodIsAnErrorNamingIt) {
  auto o = fixture_options(kFixtures / "gh200" / "hwmon", "/nonexistent-powercap");
  o.methods = {Method::Hwmon, Method::Rapl};
  try {
    open_sources(o);
    ADD_FAILURE() << "must throw";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rapl'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent-powercap"), std::string::npos) << e.what();
  }
  o.methods = {Method::Nvml};
  try {
    open_sources(o);
    ADD_FAILURE() << "must throw";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nvml'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("libscaffold-test-no-such-nvml.so"), std::string::npos)
        << e.what();
  }
  o.methods = {Method::Hwmon};
  EXPECT_EQ(open_sources(o).sources.size(), 1u);
}

// ------------------------------------------------------------------------------ output

TEST(Output, PowerAndEnergyCsvLineByLine) {
  SensorInfo gpu;
  gpu.name = "nvml:0";
  gpu.source = "nvml";
  gpu.kind = SensorKind::Accelerator;
  gpu.has_counter = true;
  SensorInfo odd;
  odd.name = "hwmon:a,b";  // needs quoting
  odd.source = "hwmon";
  odd.kind = SensorKind::Other;
  std::vector<SensorInfo> sensors = {gpu, odd};
  select_total(sensors);
  PowerTrace trace(sensors);
  trace.add(100.0, 1700000000.25, {{100.0, 50.0}, {5.0, kNaN}});
  trace.add(100.5, 1700000000.75, {{300.0, 150.0}, {kNaN, kNaN}});
  trace.add(101.0, 1700000001.25, {{300.0, 300.0}, {7.0, kNaN}});
  const auto p = lines(power_csv(trace));
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], "time_s,unix_time_s,nvml:0 [W],\"hwmon:a,b [W]\"");
  EXPECT_EQ(p[1], "0.0,1700000000.25,100.0,5.0");
  EXPECT_EQ(p[2], "0.5,1700000000.75,300.0,");
  EXPECT_EQ(p[3], "1.0,1700000001.25,300.0,7.0");
  const auto e = lines(energy_csv(trace, trace.whole()));
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0],
            "sensor,method,kind,summed,samples,failed_reads,duration_s,power_avg_w,power_peak_w,"
            "energy_integrated_j,energy_integrated_wh,energy_counter_j,energy_counter_wh,energy_j,"
            "energy_wh,"
            "energy_from");
  // nvml:0: trapezoid 0.5*(100+300)/2 + 0.5*300 = 250 J; counter 250 J.
  EXPECT_EQ(e[1],
            "nvml:0,nvml,accelerator,True,3,0,1.0,250.0,300.0,250.0,0.06944444444444445,250.0,"
            "0.06944444444444445,250.0,0.06944444444444445,counter");
  // hwmon:a,b: 5 -> 7 W bridged over the failed read: 6 J.
  EXPECT_EQ(e[2],
            "\"hwmon:a,b\",hwmon,other,False,2,1,1.0,6.0,7.0,6.0,0.0016666666666666668,,,6.0,"
            "0.0016666666666666668,integrated");
  EXPECT_EQ(e[3],
            "total,,,,,,1.0,250.0,,250.0,0.06944444444444445,250.0,0.06944444444444445,250.0,"
            "0.06944444444444445,counter");
  const std::string table = summary_table(trace, trace.whole());
  EXPECT_NE(table.find("FAILED (1 reads)"), std::string::npos) << table;
  EXPECT_NE(table.find("total over 1 sensor (counters): 0.069444 Wh = 250.000 J"),
            std::string::npos)
      << table;
}

TEST(Output, FilesAreWrittenIntoACreatedDirectory) {
  scaffold::test::TempDir tmp;
  PowerTrace trace;
  write_power_files(tmp.path() / "a" / "b", trace);
  EXPECT_EQ(core::read_file(tmp.path() / "a" / "b" / "power.csv"), "time_s,unix_time_s\n");
  EXPECT_TRUE(fs::exists(tmp.path() / "a" / "b" / "energy.csv"));
}

}  // namespace
}  // namespace scaffold::energy
