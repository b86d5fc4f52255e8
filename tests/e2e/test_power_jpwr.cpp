// End-to-end tests of `scaffold power` with jpwr's command line (docs/energy.md, "jpwr's flags"):
// jpwr's method names (gh on the GH200 fixture tree; pynvml and rocm through the stand-in NVML
// and ROCm SMI libraries of the unit tests, found through LD_LIBRARY_PATH as the real ones
// would be; gc and unknown names refused), --df-out's file names (<host>.<pid>, --df-suffix with
// %q{NAME}, --use-mpi's rank under mpiexec), their CSV tables against the fixtures' known power,
// the HDF5 files read back by pandas (an independent reader) against the same known power and
// the CSV run's tables, and the native flags beside them. Every power is constant, so each
// energy is P x the span of the file's own timestamps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {

namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

const fs::path kFixtures = fs::path(SCAFFOLD_SOURCE_DIR) / "tests" / "fixtures" / "energy";
const fs::path kGh200 = kFixtures / "gh200" / "hwmon";
const std::string kReader =
    std::string(SCAFFOLD_PYTHON) + " " + SCAFFOLD_SOURCE_DIR + "/tests/e2e/read_jpwr_files.py";

using Sensors = std::vector<std::pair<std::string, double>>;  // jpwr's column, W

// The GH200 fixture as jpwr's gh names it, in numeric hwmon order (tests/fixtures/energy).
const Sensors kGh = {{"gh:Module Power Socket 0", 412.5}, {"gh:Grace Power Socket 0", 95.25},
                     {"gh:CPU Power Socket 0", 60.0},     {"gh:SysIO Power Socket 0", 20.0},
                     {"gh:Module Power Socket 1", 398.0}, {"gh:Grace Power Socket 1", 90.0},
                     {"gh:CPU Power Socket 1", 55.5},     {"gh:SysIO Power Socket 1", 19.0}};
// The stand-ins' settings (fake_nvml.cpp, fake_rocm_smi.cpp): GPU 0 / GCD 0 have a counter.
const Sensors kNvml = {{"pynvml:0", 250.0}, {"pynvml:1", 300.0}};
const Sensors kRocm = {{"rocm:0", 120.0}, {"rocm:1", 80.0}};

std::string host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
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

// A directory with the stand-in NVML and ROCm SMI under their real names; `env()` is the
// environment prefix that makes scaffold load them at the known power.
class StandInLibraries {
 public:
  StandInLibraries() {
    fs::create_symlink(FAKE_NVML_LIBRARY, dir_.path() / "libnvidia-ml.so.1");
    fs::create_symlink(FAKE_ROCM_SMI_LIBRARY, dir_.path() / "librocm_smi64.so");
  }
  std::string env() const {
    return "LD_LIBRARY_PATH=" + quoted(dir_.path()) +
           " FAKE_NVML_POWER_MW=250000,300000 FAKE_RSMI_POWER_UW=120000000,80000000 ";
  }

 private:
  TempDir dir_;
};

// One run of `scaffold power` in `cwd` wrapping `sh -c 'echo $PPID > cwd/pid; COMMAND'`, so the
// wrapper's pid (sh's parent: the wrapper forks and execs it) is known for jpwr's file names.
struct PowerRun {
  test::CommandResult result;
  long pid = -1;
  double t0 = 0, t1 = 0;  // unix time before and after
};

PowerRun run_power(const fs::path& cwd, const std::string& env, const std::string& flags,
                   const std::string& command = "sleep 0.3") {
  PowerRun run;
  fs::create_directories(cwd);
  const fs::path pid = cwd / "pid";
  run.t0 = unix_now();
  run.result = run_command("cd " + quoted(cwd) + " && " + env + kBinary + " power --hwmon-root " +
                           quoted(kGh200) + " " + flags + " -- sh -c 'echo $PPID > " +
                           pid.string() + "; " + command + "'");
  run.t1 = unix_now();
  if (fs::exists(pid)) run.pid = std::stol(core::read_file(pid));
  return run;
}

std::string suffix(const PowerRun& run) {
  return host() + "." + std::to_string(run.pid);
}

// Energy tolerance for P over `span_s`: the integral runs on the steady clock, the timestamps
// on the system clock, which NTP may slew by up to 1 % (as in test_power.cpp).
double wh_tolerance(double w, double span_s) {
  return w * (1e-3 + 0.01 * span_s) / 3600.0;
}

// jpwr's power CSV: ",timestamps,<sensors>", rows "<i>,<unix s>,<W>...", each W the sensor's.
// Returns the span of the timestamps.
double check_power_csv(const fs::path& path, const Sensors& sensors, const PowerRun& run) {
  const auto rows = read_csv(path);
  std::vector<std::string> header = {"", "timestamps"};
  for (const auto& s : sensors) header.push_back(s.first);
  EXPECT_GE(rows.size(), 1u + 2u) << path;
  if (rows.size() < 3) return 0;
  EXPECT_EQ(rows[0], header) << path;
  double previous = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row.size() != header.size()) {
      ADD_FAILURE() << path << " row " << i << " has " << row.size() << " fields";
      return 0;
    }
    EXPECT_EQ(row[0], std::to_string(i - 1)) << path << " row " << i;
    const double t = std::stod(row[1]);
    EXPECT_GE(t, run.t0 - 0.01) << path << " row " << i;
    EXPECT_LE(t, run.t1 + 0.01) << path << " row " << i;
    EXPECT_GE(t, previous) << path << " row " << i;
    previous = t;
    for (std::size_t j = 0; j < sensors.size(); ++j)
      EXPECT_EQ(std::stod(row[2 + j]), sensors[j].second)
          << path << " row " << i << " " << header[2 + j];
  }
  return std::stod(rows.back()[1]) - std::stod(rows[1][1]);
}

// jpwr's energy CSV: ",0" then "<sensor>,<Wh>" with Wh = P x span / 3600.
void check_energy_csv(const fs::path& path, const Sensors& sensors, double span_s) {
  const auto rows = read_csv(path);
  ASSERT_EQ(rows.size(), 1u + sensors.size()) << path;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"", "0"})) << path;
  for (std::size_t j = 0; j < sensors.size(); ++j) {
    ASSERT_EQ(rows[1 + j].size(), 2u) << path;
    EXPECT_EQ(rows[1 + j][0], sensors[j].first) << path;
    const double want = sensors[j].second * span_s / 3600.0;
    EXPECT_NEAR(std::stod(rows[1 + j][1]), want, wh_tolerance(sensors[j].second, span_s))
        << path << " " << sensors[j].first;
  }
}

// The run's "Energy data:" block (the Series as pandas prints it).
std::string energy_block(const std::string& output) {
  const std::size_t begin = output.find("Energy data:\n");
  if (begin == std::string::npos) return "";
  const std::string end_mark = "dtype: float64\n";
  const std::size_t end = output.find(end_mark, begin);
  if (end == std::string::npos) return "";
  return output.substr(begin + 13, end + end_mark.size() - begin - 13);
}

TEST(JpwrPower, GhWritesJpwrsCsvFilesNamedAfterHostAndPid) {
  TempDir dir;
  const fs::path out = dir.path() / "energy_meas";
  const PowerRun run =
      run_power(dir.path(), "", "--methods gh --df-out energy_meas --df-filetype csv");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  ASSERT_GT(run.pid, 0);
  // jpwr's names, and nothing else: no energy_from_counter (no counter), no power.csv/energy.csv
  // (no --out).
  EXPECT_EQ(files_in(out), (std::set<std::string>{"power." + suffix(run) + ".csv",
                                                  "energy." + suffix(run) + ".csv"}));
  EXPECT_EQ(files_in(dir.path()), (std::set<std::string>{"energy_meas", "pid"}));
  const double span = check_power_csv(out / ("power." + suffix(run) + ".csv"), kGh, run);
  EXPECT_GT(span, 0.2);
  check_energy_csv(out / ("energy." + suffix(run) + ".csv"), kGh, span);

  // stdout: the Series as pandas prints the same values (read back from the CSV by pandas).
  const auto printed =
      run_command(kReader + " print " + quoted(out / ("energy." + suffix(run) + ".csv")));
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_EQ(energy_block(run.result.output), printed.output) << run.result.output;
}

TEST(JpwrPower, JpwrsCommandLineWithoutDashDash) {
  // jpwr's README writes the command right after the last option, without --.
  TempDir dir;
  const auto r =
      run_command("cd " + quoted(dir.path()) + " && " + kBinary + " power --hwmon-root " +
                  quoted(kGh200) + " --methods gh --df-out m --df-filetype csv sh -c 'exit 0'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(files_in(dir.path() / "m").size(), 2u) << r.output;
}

TEST(JpwrPower, PynvmlAndRocmThroughStandInLibrariesWithTheCounterTable) {
  StandInLibraries libs;
  TempDir dir;
  const PowerRun nv =
      run_power(dir.path() / "nv", libs.env(), "--methods pynvml --df-out d --df-filetype csv");
  ASSERT_EQ(nv.result.exit_code, 0) << nv.result.output;
  const fs::path d = dir.path() / "nv" / "d";
  const std::string s = suffix(nv);
  EXPECT_EQ(files_in(d), (std::set<std::string>{"power." + s + ".csv", "energy." + s + ".csv",
                                                "energy_from_counter." + s + ".csv"}));
  double span = check_power_csv(d / ("power." + s + ".csv"), kNvml, nv);
  check_energy_csv(d / ("energy." + s + ".csv"), kNvml, span);
  // One row, the counters' Wh: GPU 0 only (the stand-in's GPU 1 has no counter).
  auto counter = read_csv(d / ("energy_from_counter." + s + ".csv"));
  ASSERT_EQ(counter.size(), 2u);
  EXPECT_EQ(counter[0], (std::vector<std::string>{"", "pynvml:0"}));
  ASSERT_EQ(counter[1].size(), 2u);
  EXPECT_EQ(counter[1][0], "0");
  EXPECT_NEAR(std::stod(counter[1][1]), 250.0 * span / 3600.0, wh_tolerance(250.0, span));

  // jpwr's rocm: its energy_from_counter table is the one jpwr writes too.
  const PowerRun rocm =
      run_power(dir.path() / "rocm", libs.env(), "--methods rocm --df-out d --df-filetype csv");
  ASSERT_EQ(rocm.result.exit_code, 0) << rocm.result.output;
  const fs::path r = dir.path() / "rocm" / "d";
  const std::string rs = suffix(rocm);
  span = check_power_csv(r / ("power." + rs + ".csv"), kRocm, rocm);
  check_energy_csv(r / ("energy." + rs + ".csv"), kRocm, span);
  counter = read_csv(r / ("energy_from_counter." + rs + ".csv"));
  ASSERT_EQ(counter.size(), 2u);
  EXPECT_EQ(counter[0], (std::vector<std::string>{"", "rocm:0"}));
  ASSERT_EQ(counter[1].size(), 2u);
  EXPECT_NEAR(std::stod(counter[1][1]), 120.0 * span / 3600.0, wh_tolerance(120.0, span));

  // Several methods as jpwr takes them, in one table: pynvml's columns, then gh's.
  const PowerRun both = run_power(dir.path() / "both", libs.env(),
                                  "--methods pynvml gh --df-out d --df-filetype csv");
  ASSERT_EQ(both.result.exit_code, 0) << both.result.output;
  Sensors all = kNvml;
  all.insert(all.end(), kGh.begin(), kGh.end());
  const fs::path b = dir.path() / "both" / "d";
  span = check_power_csv(b / ("power." + suffix(both) + ".csv"), all, both);
  check_energy_csv(b / ("energy." + suffix(both) + ".csv"), all, span);
}

TEST(JpwrPower, GcAndUnknownMethodsAreRefusedBeforeTheCommandRuns) {
  TempDir dir;
  const fs::path marker = dir.path() / "ran";
  const std::string base = kBinary + " power --hwmon-root " + quoted(kGh200) + " --df-out " +
                           quoted(dir.path() / "d") + " --df-filetype csv --methods ";
  auto r = run_command(base + "gh gc -- touch " + quoted(marker));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("jpwr's method 'gc'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Graphcore"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not supported"), std::string::npos) << r.output;
  r = run_command(base + "gh gpu -- touch " + quoted(marker));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown power method 'gpu'"), std::string::npos) << r.output;
  // The command swallowed by --methods' values is named, with where -- goes.
  r = run_command(base + "gh touch " + quoted(marker));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown power method 'touch'"), std::string::npos) << r.output;
  // gh without a GH200 meter: absent, naming what was looked for.
  r = run_command(kBinary + " power --hwmon-root " + quoted(kFixtures / "generic" / "hwmon") +
                  " --methods gh --df-out " + quoted(dir.path() / "d") +
                  " --df-filetype csv -- touch " + quoted(marker));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no GH200 power meter under"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(files_in(dir.path() / "d").empty());
}

TEST(JpwrPower, DfSuffixExpandsEnvironmentVariables) {
  TempDir dir;
  // As jpwr: <suffix>.<host>.<pid>, %q{NAME} replaced by $NAME.
  PowerRun run =
      run_power(dir.path() / "a", "SCAFFOLD_TEST_PROCID=3 ",
                "--methods gh --df-out d --df-filetype csv --df-suffix '%q{SCAFFOLD_TEST_PROCID}'");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  std::string s = "3." + suffix(run);
  EXPECT_EQ(files_in(dir.path() / "a" / "d"),
            (std::set<std::string>{"power." + s + ".csv", "energy." + s + ".csv"}));
  check_energy_csv(dir.path() / "a" / "d" / ("energy." + s + ".csv"), kGh,
                   check_power_csv(dir.path() / "a" / "d" / ("power." + s + ".csv"), kGh, run));
  // Text around %q{} stays (jpwr would keep only the first variable's value: documented).
  run = run_power(dir.path() / "b", "SCAFFOLD_TEST_PROCID=3 SCAFFOLD_TEST_JOB=77 ",
                  "--methods gh --df-out d --df-filetype csv --df-suffix "
                  "'job%q{SCAFFOLD_TEST_JOB}-r%q{SCAFFOLD_TEST_PROCID}'",
                  "true");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  s = "job77-r3." + suffix(run);
  EXPECT_EQ(files_in(dir.path() / "b" / "d"),
            (std::set<std::string>{"power." + s + ".csv", "energy." + s + ".csv"}));
  // An empty suffix is none, as in jpwr.
  run = run_power(dir.path() / "c", "", "--methods gh --df-out d --df-filetype csv --df-suffix ''",
                  "true");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(
      files_in(dir.path() / "c" / "d"),
      (std::set<std::string>{"power." + suffix(run) + ".csv", "energy." + suffix(run) + ".csv"}));

  // An unset variable (jpwr would write "None") is a usage error before anything runs.
  const fs::path marker = dir.path() / "ran";
  auto r = run_command("env -u SCAFFOLD_TEST_UNSET " + kBinary + " power --hwmon-root " +
                       quoted(kGh200) + " --methods gh --df-out " + quoted(dir.path() / "e") +
                       " --df-filetype csv --df-suffix '%q{SCAFFOLD_TEST_UNSET}' -- touch " +
                       quoted(marker));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the environment variable SCAFFOLD_TEST_UNSET is not set"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(files_in(dir.path() / "e").empty());
  // --df-suffix names --df-out's files: without --df-out it is refused.
  r = run_command(kBinary + " power --methods gh --hwmon-root " + quoted(kGh200) +
                  " --df-suffix x -- touch " + quoted(marker));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--df-suffix names jpwr's files"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(marker));
}

// pandas' reading of the files (read_jpwr_files.py dump), by path.
nlohmann::json read_with_pandas(const std::vector<fs::path>& paths) {
  std::string cmd = kReader + " dump";
  for (const auto& p : paths) cmd += " " + quoted(p);
  const auto r = run_command(cmd + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << "python3 with pandas and PyTables (python3-pandas python3-tables, "
                               "scripts/install-deps --tests) must read the files: "
                            << run_command(cmd).output;
  return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::object();
}

TEST(JpwrPower, H5FilesReadBackByPandasHoldTheKnownPowerAndTheCsvRunsTables) {
  StandInLibraries libs;
  TempDir dir;
  const std::string flags = "--methods pynvml gh --df-out d";  // h5: jpwr's default file type
#if !SCAFFOLD_TEST_HDF5
  const PowerRun refused = run_power(dir.path() / "h5", libs.env(), flags, "touch ran");
  EXPECT_EQ(refused.result.exit_code, 1) << refused.result.output;
  EXPECT_NE(refused.result.output.find("built without HDF5"), std::string::npos)
      << refused.result.output;
  EXPECT_FALSE(fs::exists(dir.path() / "h5" / "ran"));
  GTEST_SKIP() << "built without HDF5 (libhdf5-dev): h5 is refused, as checked";
#endif
  const PowerRun csv = run_power(dir.path() / "csv", libs.env(), flags + " --df-filetype csv");
  const PowerRun h5 = run_power(dir.path() / "h5", libs.env(), flags);
  ASSERT_EQ(csv.result.exit_code, 0) << csv.result.output;
  ASSERT_EQ(h5.result.exit_code, 0) << h5.result.output;
  const fs::path dc = dir.path() / "csv" / "d", dh = dir.path() / "h5" / "d";
  const std::vector<std::string> tables = {"power", "energy", "energy_from_counter"};
  std::set<std::string> want_csv, want_h5;
  std::vector<fs::path> paths;
  for (const auto& t : tables) {
    want_csv.insert(t + "." + suffix(csv) + ".csv");
    want_h5.insert(t + "." + suffix(h5) + ".h5");
    paths.push_back(dc / (t + "." + suffix(csv) + ".csv"));
    paths.push_back(dh / (t + "." + suffix(h5) + ".h5"));
  }
  ASSERT_EQ(files_in(dc), want_csv);
  ASSERT_EQ(files_in(dh), want_h5);
  // The layout pandas itself writes for the same tables, node by node and attribute by attribute
  // (h5py; pandas' own file uncompressed, as ours).
  std::string layout = kReader + " layout";
  for (std::size_t k = 0; k < tables.size(); ++k) layout += " " + quoted(paths[2 * k + 1]);
  const auto same = run_command(layout);
  EXPECT_EQ(same.exit_code, 0) << "needs python3-h5py besides pandas and PyTables: " << same.output;
  const nlohmann::json got = read_with_pandas(paths);
  ASSERT_EQ(got.size(), paths.size());
  Sensors all = kNvml;
  all.insert(all.end(), kGh.begin(), kGh.end());

  for (std::size_t k = 0; k < tables.size(); ++k) {
    const nlohmann::json& c = got[paths[2 * k].string()];
    const nlohmann::json& h = got[paths[2 * k + 1].string()];
    SCOPED_TRACE(tables[k]);
    EXPECT_EQ(h["keys"], nlohmann::json::array({"/jpwr"}));
    EXPECT_EQ(h["kind"], k == 1 ? "series" : "frame");
    if (k == 1)
      EXPECT_EQ(h["index"], c["index"]);
    else
      EXPECT_EQ(h["columns"], c["columns"]);
  }
  // The power frame: timestamps inside the run, every sensor at its known power.
  const nlohmann::json& power = got[paths[1].string()];
  std::vector<std::string> columns = {"timestamps"};
  for (const auto& s : all) columns.push_back(s.first);
  ASSERT_EQ(power["columns"].get<std::vector<std::string>>(), columns);
  const auto& rows = power["rows"];
  ASSERT_GE(rows.size(), 3u);
  ASSERT_EQ(power["index"].size(), rows.size());
  double previous = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(power["index"][i].get<int>(), static_cast<int>(i));
    ASSERT_EQ(rows[i].size(), columns.size());
    const double t = rows[i][0].get<double>();
    EXPECT_GE(t, std::max(previous, h5.t0 - 0.01)) << "row " << i;
    EXPECT_LE(t, h5.t1 + 0.01) << "row " << i;
    previous = t;
    for (std::size_t j = 0; j < all.size(); ++j)
      EXPECT_EQ(rows[i][1 + j].get<double>(), all[j].second)
          << "row " << i << " " << columns[1 + j];
  }
  const double span = rows.back()[0].get<double>() - rows.front()[0].get<double>();
  // The energy Series: P x span in Wh, per sensor, under jpwr's names.
  const nlohmann::json& energy = got[paths[3].string()];
  ASSERT_EQ(energy["values"].size(), all.size());
  for (std::size_t j = 0; j < all.size(); ++j) {
    EXPECT_EQ(energy["index"][j], all[j].first);
    EXPECT_NEAR(energy["values"][j].get<double>(), all[j].second * span / 3600.0,
                wh_tolerance(all[j].second, span))
        << all[j].first;
  }
  // energy_from_counter: one row, GPU 0's counter.
  const nlohmann::json& counter = got[paths[5].string()];
  ASSERT_EQ(counter["columns"], nlohmann::json::array({"pynvml:0"}));
  ASSERT_EQ(counter["rows"].size(), 1u);
  EXPECT_NEAR(counter["rows"][0][0].get<double>(), 250.0 * span / 3600.0,
              wh_tolerance(250.0, span));
  // The CSV run's tables as pandas reads them hold the same known values.
  const nlohmann::json& csv_power = got[paths[0].string()];
  ASSERT_GE(csv_power["rows"].size(), 1u);
  for (std::size_t j = 0; j < all.size(); ++j)
    EXPECT_EQ(csv_power["rows"][0][1 + j].get<double>(), all[j].second) << columns[1 + j];
}

#if SCAFFOLD_TEST_MPI
std::string mpi_power(int ranks, const fs::path& dir, const std::string& flags) {
  return "cd " + quoted(dir) + " && " + test::mpiexec(ranks) + kBinary + " power --hwmon-root " +
         quoted(kGh200) + " --methods gh --df-out d --df-filetype csv " + flags + " -- sleep 0.3";
}

TEST(JpwrPower, UseMpiUnderMpiexecWritesOneFileSetPerMeasuringRank) {
  TempDir dir;
  for (const char* sub : {"a", "b", "c", "e"}) fs::create_directories(dir.path() / sub);
  // --mpi-ranks 0 1: both ranks measure; the suffix is the rank (no --df-suffix).
  const double t0 = unix_now();
  auto r = run_command(mpi_power(2, dir.path() / "a", "--use-mpi --mpi-ranks 0 1"));
  PowerRun window;
  window.t0 = t0;
  window.t1 = unix_now();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path a = dir.path() / "a" / "d";
  EXPECT_EQ(files_in(a),
            (std::set<std::string>{"power.0.csv", "energy.0.csv", "power.1.csv", "energy.1.csv"}));
  for (const char* rank : {"0", "1"}) {
    SCOPED_TRACE(std::string("rank ") + rank);
    const double span = check_power_csv(a / ("power." + std::string(rank) + ".csv"), kGh, window);
    check_energy_csv(a / ("energy." + std::string(rank) + ".csv"), kGh, span);
  }

  // --use-mpi alone: rank 0 measures (jpwr's default), rank 1 only runs the command.
  r = run_command(mpi_power(2, dir.path() / "b", "--use-mpi"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(files_in(dir.path() / "b" / "d"),
            (std::set<std::string>{"power.0.csv", "energy.0.csv"}));

  // --df-suffix %q{OMPI_COMM_WORLD_RANK} (as CARAML's %q{SLURM_PROCID}): <rank>.<host>.<pid>.
  r = run_command(mpi_power(2, dir.path() / "c",
                            "--use-mpi --mpi-ranks 0 1 --df-suffix '%q{OMPI_COMM_WORLD_RANK}'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex name("(power|energy)\\.([01])\\." +
                        std::regex_replace(host(), std::regex("\\."), "\\.") + "\\.[0-9]+\\.csv");
  std::set<std::string> kinds;
  for (const auto& f : files_in(dir.path() / "c" / "d")) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(f, m, name)) << f;
    if (m.size() == 3) kinds.insert(m[1].str() + m[2].str());
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"power0", "power1", "energy0", "energy1"}));

  // A rank outside the job is refused on every rank, before anything runs.
  r = run_command(mpi_power(2, dir.path() / "e", "--use-mpi --mpi-ranks 0 2"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--mpi-ranks: rank 2 is not in this job of 2 tasks"), std::string::npos)
      << r.output;
  EXPECT_TRUE(files_in(dir.path() / "e" / "d").empty());
}
#endif

TEST(JpwrPower, MpiRanksRequiresUseMpi) {
  const auto r = run_command(kBinary + " power --methods gh --hwmon-root " + quoted(kGh200) +
                             " --df-out /nonexistent-dir/d --mpi-ranks 0 -- true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--mpi-ranks requires --use-mpi"), std::string::npos) << r.output;
}

TEST(JpwrPower, NativeFlagsStillWorkAndBothFileSetsCanBeAsked) {
  StandInLibraries libs;
  TempDir dir;
  // Ours: a comma list and --out; our names, no jpwr files.
  PowerRun run = run_power(dir.path() / "native", libs.env(), "--methods nvml,hwmon --out o");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(files_in(dir.path() / "native"), (std::set<std::string>{"o", "pid"}));
  EXPECT_EQ(files_in(dir.path() / "native" / "o"),
            (std::set<std::string>{"power.csv", "energy.csv"}));
  const auto power = read_csv(dir.path() / "native" / "o" / "power.csv");
  ASSERT_GE(power.size(), 3u);
  std::vector<std::string> header = {"time_s", "unix_time_s", "nvml:0 [W]", "nvml:1 [W]"};
  for (const auto& s : kGh) header.push_back("hwmon:" + s.first.substr(3) + " [W]");
  EXPECT_EQ(power[0], header);
  EXPECT_EQ(power[1][2], "250.0");
  EXPECT_EQ(power[1][4], "412.5");
  EXPECT_EQ(energy_block(run.result.output), "") << "no jpwr Series without --df-out";

  // Both: --out's files and --df-out's, from the same samples.
  run = run_power(dir.path() / "both", "", "--methods hwmon --out o --df-out d --df-filetype csv");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(files_in(dir.path() / "both" / "o"),
            (std::set<std::string>{"power.csv", "energy.csv"}));
  const fs::path jp = dir.path() / "both" / "d" / ("power." + suffix(run) + ".csv");
  check_power_csv(jp, kGh, run);
  EXPECT_EQ(read_csv(jp).size(), read_csv(dir.path() / "both" / "o" / "power.csv").size());
}

}  // namespace
}  // namespace scaffold
