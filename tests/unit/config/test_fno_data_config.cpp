// Tests for FnoDataConfig: the defaults (written here, not read from the code), range checks and
// cross-key checks naming their keys, the YAML round trip, the shipped configs, and the key table
// appended to another struct (as the FNO benchmark's config can) with shared keys skipped and the
// cross-checks reading that struct's own values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "workloads/fno/data/config.hpp"
#include "workloads/fno/data/config_keys.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;
using FD = FnoDataConfig;

class FnoDataConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ =
        fs::temp_directory_path() / ("scaffold_test_fno_data_config_" + std::to_string(::getpid()) +
                                     "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& text) const {
    const fs::path path = dir_ / "cfg.yml";
    std::ofstream(path) << text;
    return path.string();
  }
  static FD load(const std::vector<std::string>& files) {
    LoadRequest r;
    r.config_files = files;
    r.resolve_paths = false;
    return load_config_as<FD>(r).config;
  }
  // The error of loading `text`; fails unless it names every one of `needles`.
  std::string error_of(const std::string& text, const std::vector<std::string>& needles) const {
    try {
      load({write(text)});
    } catch (const core::Error& e) {
      const std::string m = e.what();
      for (const auto& n : needles)
        EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' missing in:\n" << m;
      return m;
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return "";
  }
  fs::path dir_;
};

TEST_F(FnoDataConfigTest, DefaultsAreCaramlsRbc2dAndThePapersSettings) {
  const FD c = load({write("seed: 42\n")});
  EXPECT_EQ(c.problem, "rbc2d");
  EXPECT_EQ(c.data_dir, "fno_data");
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.grid, (std::vector<int>{256, 64}));
  EXPECT_EQ(c.train_samples, 1000);
  EXPECT_EQ(c.val_samples, 100);
  EXPECT_EQ(c.t_in, 1);
  EXPECT_EQ(c.t_out, 1);
  EXPECT_EQ(c.viscosity, 0.0);
  EXPECT_EQ(c.burgers_solver_refinement, 8);
  EXPECT_EQ(c.burgers_final_time, 1.0);
  EXPECT_EQ(c.burgers_dt, 1e-3);
  EXPECT_EQ(c.burgers_grf_scale, 625.0);
  EXPECT_EQ(c.burgers_grf_tau, 5.0);
  EXPECT_EQ(c.burgers_grf_alpha, 2.0);
  EXPECT_EQ(c.ns_solver_refinement, 1);
  EXPECT_EQ(c.ns_forcing_amplitude, 0.1);
  EXPECT_EQ(c.ns_record_interval, 1.0);
  EXPECT_EQ(c.ns_dt, 1e-2);
  EXPECT_EQ(c.ns_grf_scale, 343.0);
  EXPECT_EQ(c.ns_grf_tau, 7.0);
  EXPECT_EQ(c.ns_grf_alpha, 2.5);
  EXPECT_EQ(c.rbc_rayleigh, 1e7);
  EXPECT_EQ(c.rbc_prandtl, 1.0);
  EXPECT_EQ(c.rbc_aspect, 4.0);
  EXPECT_EQ(c.rbc_dt, 5e-3);
  EXPECT_EQ(c.rbc_spinup_time, 50.0);
  EXPECT_EQ(c.rbc_states, 201);
  EXPECT_EQ(c.rbc_record_steps, 1);
  EXPECT_EQ(c.rbc_noise_amplitude, 1e-3);
  EXPECT_EQ(c.rbc_cfl_max, 0.8);
  EXPECT_EQ(known_keys<FD>().size(), 31u);
  for (const auto& key : schema_of<FD>()) {
    EXPECT_FALSE(key.help.empty()) << key.name;
    EXPECT_FALSE(key.allowed.empty()) << key.name;
  }
}

TEST_F(FnoDataConfigTest, RangeChecksNameTheKeyAndWhatIsAllowed) {
  error_of("problem: darcy\n", {"problem", "burgers1d, navier_stokes2d, rbc2d"});
  error_of("grid: [256, 64, 8]\n", {"grid"});
  error_of("train_samples: 0\n", {"train_samples", ">= 1"});
  error_of("rbc_dt: -1\n", {"rbc_dt", "> 0"});
  error_of("ns_forcing_amplitude: -0.1\n", {"ns_forcing_amplitude", ">= 0"});
  error_of("burgers_solver_refinement: 100\n", {"burgers_solver_refinement", "[1, 64]"});
  error_of("rbc_states: 1\n", {"rbc_states", ">= 2"});
  error_of("seed: -3\n", {"seed"});
}

TEST_F(FnoDataConfigTest, CrossChecksFitTheKeysToTheProblem) {
  error_of("problem: burgers1d\n", {"grid", "[N] for burgers1d"});  // the default grid is 2-D
  error_of("problem: navier_stokes2d\ngrid: [64, 32]\n", {"grid", "[N, N]"});
  error_of("problem: burgers1d\ngrid: [64]\nt_in: 2\n", {"t_in", "1 for burgers1d"});
  error_of("viscosity: 0.01\n", {"viscosity", "rbc_rayleigh"});
  error_of("problem: burgers1d\ngrid: [64]\nt_out: 3\n",
           {"burgers_dt", "burgers_final_time / t_out"});
  error_of("problem: navier_stokes2d\ngrid: [64, 64]\nns_dt: 0.3\n",
           {"ns_dt", "ns_record_interval"});
  error_of("t_in: 150\nt_out: 60\n", {"rbc_states", "t_in + t_out = 210"});
  const FD ok = load(
      {write("problem: navier_stokes2d\ngrid: [64, 64]\nt_in: 10\nt_out: 40\nviscosity: 1e-4\n")});
  EXPECT_EQ(ok.viscosity, 1e-4);
}

TEST_F(FnoDataConfigTest, RoundTripsThroughYaml) {
  FD c;
  c.problem = "navier_stokes2d";
  c.data_dir = "/tmp/fno data";
  c.seed = 7;
  c.grid = {32, 32};
  c.train_samples = 3;
  c.t_in = 4;
  c.t_out = 6;
  c.viscosity = 1e-5;
  c.ns_dt = 0.025;
  c.ns_grf_scale = 686.0;
  c.rbc_rayleigh = 3.3e6;
  const FD back = from_yaml_text<FD>(to_yaml(c), "test");
  EXPECT_EQ(to_yaml(back), to_yaml(c));
  EXPECT_EQ(back.grid, c.grid);
  EXPECT_EQ(back.viscosity, 1e-5);
  EXPECT_EQ(back.rbc_rayleigh, 3.3e6);
  EXPECT_EQ(back.data_dir, c.data_dir);
}

TEST_F(FnoDataConfigTest, ShippedConfigsLoad) {
  for (const char* name : {"fno_data.yml", "fno_data_quickstart.yml", "fno_data_navier_stokes.yml",
                           "fno_data_burgers.yml"}) {
    const FD c = load({std::string(SCAFFOLD_SOURCE_DIR) + "/configs/" + name});
    EXPECT_FALSE(c.problem.empty()) << name;
  }
  const FD ns = load({std::string(SCAFFOLD_SOURCE_DIR) + "/configs/fno_data_navier_stokes.yml"});
  EXPECT_EQ(ns.t_in, 10);
  EXPECT_EQ(ns.t_out, 40);
}

// A benchmark-like struct owning the shared keys and holding the generator keys in `data`.
struct Outer {
  std::string problem = "rbc2d";
  int t_in = 1, t_out = 1;
  FnoDataConfig data;
};
FnoDataConfig& data_of(Outer& o) {
  return o.data;
}
FnoDataConfig view_of(const Outer& o) {
  FnoDataConfig d = o.data;
  d.problem = o.problem;
  d.t_in = o.t_in;
  d.t_out = o.t_out;
  return d;
}

TEST(FnoDataKeys, AppendToAnotherStructSkipsSharedKeysAndChecksItsValues) {
  std::vector<KeySpecT<Outer>> t;
  append_fno_data_keys<Outer>(t, &data_of, &view_of, kFnoSharedDataKeys);
  ASSERT_EQ(t.size(), 31u - kFnoSharedDataKeys.size());
  for (const auto& k : t)
    for (const auto& shared : kFnoSharedDataKeys) EXPECT_NE(k.name, shared);
  auto find = [&](const std::string& name) -> const KeySpecT<Outer>& {
    for (const auto& k : t)
      if (k.name == name) return k;
    throw std::runtime_error("no key " + name);
  };
  Outer o;
  RawValue v;
  v.form = RawValue::Form::kScalar;
  v.scalar = "150";
  EXPECT_TRUE(find("rbc_states").assign_to(o, v).error.empty());
  EXPECT_EQ(o.data.rbc_states, 150);
  EXPECT_EQ(find("rbc_states").yaml(o), "150");
  o.t_in = 100;
  o.t_out = 60;  // the outer struct's own values: 160 > 150
  EXPECT_NE(find("rbc_states").cross_check(o).find("t_in + t_out = 160"), std::string::npos);
  o.problem = "navier_stokes2d";
  EXPECT_EQ(find("rbc_states").cross_check(o), "");
}

}  // namespace
}  // namespace scaffold::config
