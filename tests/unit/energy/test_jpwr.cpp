// jpwr's command line in the energy module: its method names (pynvml, rocm, gh; gc refused),
// the gh method against the GH200 and generic hwmon fixtures, --df-suffix's %q{NAME} expansion
// and jpwr's file-name suffixes, and the tables and CSV text of a hand-made trace against
// hand-written text (Python's float repr and pandas' to_csv layout, worked out by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "energy/jpwr.hpp"
#include "energy/sources.hpp"
#include "energy/sysfs.hpp"
#include "energy/trace.hpp"

namespace scaffold::energy {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(SCAFFOLD_SOURCE_DIR) / "tests" / "fixtures" / "energy";

// The message of the core::UsageError that `f` throws ("" when it throws none).
template <typename F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const core::UsageError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ------------------------------------------------------------------------------ methods

TEST(JpwrMethods, JpwrsNamesMapToOurMethods) {
  using V = std::vector<std::string>;
  EXPECT_EQ(parse_methods(V{"pynvml"}), (std::vector<Method>{Method::Nvml}));
  EXPECT_EQ(parse_methods(V{"rocm"}), (std::vector<Method>{Method::Rocm}));
  EXPECT_EQ(parse_methods(V{"gh"}), (std::vector<Method>{Method::Gh}));
  // Several values as jpwr takes them, comma lists as ours, both mixed; duplicates dropped.
  EXPECT_EQ(parse_methods(V{"pynvml", "gh"}), (std::vector<Method>{Method::Nvml, Method::Gh}));
  EXPECT_EQ(parse_methods(V{"rocm", "nvml,rapl", "pynvml"}),
            (std::vector<Method>{Method::Rocm, Method::Nvml, Method::Rapl}));
  // hwmon reads every GH200 meter gh reads: both would count them twice.
  EXPECT_EQ(parse_methods(V{"gh", "hwmon"}), (std::vector<Method>{Method::Hwmon}));
  EXPECT_EQ(parse_methods(V{"hwmon,gh"}), (std::vector<Method>{Method::Hwmon}));
  EXPECT_TRUE(parse_methods(V{"auto"}).empty());
  EXPECT_STREQ(method_name(Method::Gh), "gh");
  EXPECT_EQ(parse_methods("pynvml,gh"), (std::vector<Method>{Method::Nvml, Method::Gh}));
}

TEST(JpwrMethods, GcIsRefusedWithTheReasonAndUnknownNamesAreNamed) {
  using V = std::vector<std::string>;
  const std::string gc = usage_error([] { parse_methods(V{"pynvml", "gc"}); });
  EXPECT_TRUE(contains(gc, "'gc'")) << gc;
  EXPECT_TRUE(contains(gc, "Graphcore")) << gc;
  EXPECT_TRUE(contains(gc, "not supported")) << gc;
  EXPECT_FALSE(usage_error([] { parse_methods("gh,gc"); }).empty());
  const std::string unknown = usage_error([] { parse_methods(V{"pynvml", "gpu"}); });
  EXPECT_TRUE(contains(unknown, "unknown power method 'gpu'")) << unknown;
  EXPECT_TRUE(contains(unknown, "pynvml")) << unknown;
  // A command swallowed by --methods' values: the hint says where -- goes.
  const std::string swallowed = usage_error([] { parse_methods(V{"gh", "sleep", "1"}); });
  EXPECT_TRUE(contains(swallowed, "'sleep'")) << swallowed;
  EXPECT_TRUE(contains(swallowed, "--")) << swallowed;
  const std::string mixed = usage_error([] { parse_methods(V{"auto", "gh"}); });
  EXPECT_TRUE(contains(mixed, "'auto' cannot be combined")) << mixed;
}

TEST(JpwrMethods, GhReadsOnlyTheGh200MetersUnderJpwrsNames) {
  HwmonOptions o;
  o.root = kFixtures / "gh200" / "hwmon";
  o.gh200_only = true;
  auto gh = make_hwmon_source(o);
  EXPECT_EQ(gh->method(), "gh");
  const auto sensors = gh->init();
  const std::vector<std::string> want = {"gh:Module Power Socket 0", "gh:Grace Power Socket 0",
                                         "gh:CPU Power Socket 0",    "gh:SysIO Power Socket 0",
                                         "gh:Module Power Socket 1", "gh:Grace Power Socket 1",
                                         "gh:CPU Power Socket 1",    "gh:SysIO Power Socket 1"};
  ASSERT_EQ(sensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(sensors[i].jpwr_name, want[i]) << i;
    EXPECT_EQ(sensors[i].source, "gh") << i;
  }
  EXPECT_EQ(sensors[0].kind, SensorKind::Module);

  // The generic tree's amdgpu sensors are hwmon's, not gh's: none qualifies.
  o.root = kFixtures / "generic" / "hwmon";
  try {
    make_hwmon_source(o)->init();
    ADD_FAILURE() << "gh must be unavailable without GH200 meters";
  } catch (const SourceUnavailable& e) {
    EXPECT_TRUE(contains(e.what(), "no GH200 power meter")) << e.what();
    EXPECT_TRUE(contains(e.what(), o.root.string())) << e.what();
  }
  // Plain hwmon there has sensors, and no jpwr name for them.
  o.gh200_only = false;
  const auto generic = make_hwmon_source(o)->init();
  ASSERT_FALSE(generic.empty());
  for (const auto& s : generic) EXPECT_EQ(s.jpwr_name, "") << s.name;
}

// ------------------------------------------------------------------------------ suffix

TEST(JpwrSuffix, PercentQNamesAreReplacedByTheEnvironment) {
  const std::map<std::string, std::string> vars = {
      {"SLURM_PROCID", "3"}, {"A", "x"}, {"EMPTY", ""}, {"SLASH", "a/b"}};
  const jpwr::EnvLookup env = [&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(jpwr::expand_suffix("%q{SLURM_PROCID}", env), "3");
  EXPECT_EQ(jpwr::expand_suffix("run%q{SLURM_PROCID}-%q{A}", env), "run3-x");
  EXPECT_EQ(jpwr::expand_suffix("plain", env), "plain");
  EXPECT_EQ(jpwr::expand_suffix("%q{EMPTY}", env), "");

  const std::string unset = usage_error([&] { jpwr::expand_suffix("r%q{NOT_SET_HERE}", env); });
  EXPECT_TRUE(contains(unset, "NOT_SET_HERE is not set")) << unset;
  EXPECT_TRUE(contains(unset, "--df-suffix 'r%q{NOT_SET_HERE}'")) << unset;
  EXPECT_TRUE(contains(usage_error([&] { jpwr::expand_suffix("%q{A", env); }), "closing"));
  EXPECT_TRUE(contains(usage_error([&] { jpwr::expand_suffix("%q{}", env); }), "names no"));
  EXPECT_TRUE(contains(usage_error([&] { jpwr::expand_suffix("%q{SLASH}", env); }), "'/'"));
  EXPECT_TRUE(contains(usage_error([&] { jpwr::expand_suffix("a/b", env); }), "'/'"));
}

TEST(JpwrSuffix, FileSuffixesAsJpwrBuildsThem) {
  jpwr::SuffixParts p;
  p.host = "node7";
  p.pid = 4242;
  EXPECT_EQ(jpwr::file_suffix(p), "node7.4242");  // jpwr's default
  p.use_mpi = true;
  p.rank = 1;
  EXPECT_EQ(jpwr::file_suffix(p), "1");  // --use-mpi without --df-suffix: the rank alone
  p.suffix = "3";
  EXPECT_EQ(jpwr::file_suffix(p), "3.node7.4242");  // --df-suffix wins over --use-mpi
  p.use_mpi = false;
  EXPECT_EQ(jpwr::file_suffix(p), "3.node7.4242");
  EXPECT_STREQ(jpwr::extension(jpwr::FileType::Csv), "csv");
  EXPECT_STREQ(jpwr::extension(jpwr::FileType::H5), "h5");
}

// ------------------------------------------------------------------------------ tables

// Four sensors over t = 0, 1, 2 s: a GH200 module (100, 200, 100 W: trapezoid 300 J), an NVML
// GPU at 50 W with a counter that advances 100 J, a RAPL package at 20 W whose second read
// fails (no jpwr name: ours is kept), and a second sensor with the module's jpwr name.
PowerTrace hand_trace() {
  SensorInfo module, gpu, rapl, again;
  module.name = "hwmon:Module Power Socket 0";
  module.jpwr_name = "gh:Module Power Socket 0";
  gpu.name = "nvml:0";
  gpu.jpwr_name = "pynvml:0";
  gpu.has_counter = true;
  rapl.name = "rapl:package-0";
  again.name = "hwmon:again";
  again.jpwr_name = "gh:Module Power Socket 0";
  PowerTrace trace({module, gpu, rapl, again});
  const double module_w[] = {100.0, 200.0, 100.0};
  for (int i = 0; i < 3; ++i) {
    std::vector<SensorReading> r(4);
    r[0].power_w = module_w[i];
    r[1].power_w = 50.0;
    r[1].counter_j = 1000.0 + 50.0 * i;
    r[2].power_w = i == 1 ? kNaN : 20.0;
    r[3].power_w = 10.0;
    trace.add(i, 1700000000.25 + i, r);
  }
  return trace;
}

TEST(JpwrTables, PowerFrameAndEnergySeriesAsPandasToCsvWritesThem) {
  const jpwr::Tables t = jpwr::make_tables(hand_trace());
  EXPECT_EQ(jpwr::frame_csv(t.power),
            ",timestamps,gh:Module Power Socket 0,pynvml:0,rapl:package-0,"
            "gh:Module Power Socket 0 #2\n"
            "0,1700000000.25,100.0,50.0,20.0,10.0\n"
            "1,1700000001.25,200.0,50.0,,10.0\n"
            "2,1700000002.25,100.0,50.0,20.0,10.0\n");
  // Wh: 300 J, 100 J, 40 J (the failed read bridged), 20 J over 3600, as Python's repr.
  EXPECT_EQ(jpwr::series_csv(t.energy),
            ",0\n"
            "gh:Module Power Socket 0,0.08333333333333333\n"
            "pynvml:0,0.027777777777777776\n"
            "rapl:package-0,0.011111111111111112\n"
            "gh:Module Power Socket 0 #2,0.005555555555555556\n");
  ASSERT_TRUE(t.energy_from_counter.has_value());
  EXPECT_EQ(jpwr::frame_csv(*t.energy_from_counter), ",pynvml:0\n0,0.027777777777777776\n");
}

TEST(JpwrTables, NoCounterNoCounterTableAndCsvQuoting) {
  SensorInfo odd;
  odd.name = "hwmon:a,\"b\"";
  PowerTrace trace({odd});
  std::vector<SensorReading> r(1);
  r[0].power_w = 1.5;
  trace.add(0.0, 10.0, r);
  trace.add(0.5, 10.5, r);
  const jpwr::Tables t = jpwr::make_tables(trace);
  EXPECT_FALSE(t.energy_from_counter.has_value());
  // Python's csv module: a field with a comma or quote in quotes, its quotes doubled.
  EXPECT_EQ(jpwr::frame_csv(t.power),
            ",timestamps,\"hwmon:a,\"\"b\"\"\"\n0,10.0,1.5\n1,10.5,1.5\n");
}

TEST(JpwrTables, TheEnergySeriesIsPrintedInPandasLayout) {
  // What print(pandas.Series(...)) shows (pandas 1.5): index left-aligned, four spaces, values
  // right-aligned with the decimals the widest needs up to 6, trailing zeros common to all cut.
  jpwr::Series s;
  s.index = {"pynvml:0", "gh:Module Power Socket 0"};
  s.values = {0.5, 1.25};
  EXPECT_EQ(jpwr::series_text(s),
            "pynvml:0                    0.50\n"
            "gh:Module Power Socket 0    1.25\n"
            "dtype: float64\n");
  s.values = {0.05729166666666667, 0.0};
  EXPECT_EQ(jpwr::series_text(s),
            "pynvml:0                    0.057292\n"
            "gh:Module Power Socket 0    0.000000\n"
            "dtype: float64\n");
  s.values = {kNaN, 2.0};
  EXPECT_EQ(jpwr::series_text(s),
            "pynvml:0                    NaN\n"
            "gh:Module Power Socket 0    2.0\n"
            "dtype: float64\n");
}

TEST(JpwrTables, Hdf5IsAvailableExactlyWhenTheBuildFoundIt) {
#if SCAFFOLD_TEST_HDF5
  EXPECT_TRUE(jpwr::hdf5_available());
  EXPECT_EQ(jpwr::frame_h5(jpwr::make_tables(hand_trace()).power).substr(0, 8),
            std::string("\x89HDF\r\n\x1a\n", 8));
#else
  EXPECT_FALSE(jpwr::hdf5_available());
  try {
    jpwr::series_h5({});
    ADD_FAILURE() << "must throw without HDF5";
  } catch (const core::Error& e) {
    EXPECT_TRUE(contains(e.what(), "built without HDF5")) << e.what();
  }
#endif
}

}  // namespace
}  // namespace scaffold::energy
