// The FNO dataset cache, generation and sources: the key changes with every parameter of the
// chosen problem (and with nothing else), threads do not change a byte, a rerun reuses, an
// interrupted generation is resumed (only what is missing or damaged is made again, temporary
// leftovers are dropped, and the result equals an uninterrupted run), the statistics in meta.json
// equal those computed here from the files, and the sources serve the files' slices.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"
#include "core/npy.hpp"
#include "core/sha256.hpp"
#include "dist/communicator.hpp"
#include "test_util.hpp"
#include "unit/workloads/fno/fno_data_fixtures.hpp"
#include "unit/workloads/fno/fno_test_util.hpp"
#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/generate.hpp"
#include "workloads/fno/data/sources.hpp"

namespace scaffold::fno {
namespace {

namespace fs = std::filesystem;
using scaffold::test::TempDir;
using test::snapshot;
using test::tiny_options;

class FnoDataEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { runtime() = std::make_unique<dist::Runtime>(nullptr, nullptr); }
  void TearDown() override { runtime().reset(); }
  static std::unique_ptr<dist::Runtime>& runtime() {
    static std::unique_ptr<dist::Runtime> r;
    return r;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new FnoDataEnvironment);
dist::Communicator& world() {
  return FnoDataEnvironment::runtime()->world();
}

constexpr FnoProblem kProblems[] = {FnoProblem::Burgers, FnoProblem::NavierStokes,
                                    FnoProblem::RayleighBenard, FnoProblem::RayleighBenard3d};

using Mutation = std::pair<const char*, std::function<void(FnoDataOptions&)>>;

std::vector<Mutation> mutations(FnoProblem p) {
  switch (p) {
    case FnoProblem::Burgers:
      return {{"grid", [](auto& o) { o.burgers.grid = 16; }},
              {"solver_grid", [](auto& o) { o.burgers.solver_grid = 128; }},
              {"viscosity", [](auto& o) { o.burgers.viscosity = 0.05; }},
              {"final_time", [](auto& o) { o.burgers.final_time = 0.2; }},
              {"dt", [](auto& o) { o.burgers.dt = 0.005; }},
              {"steps_out", [](auto& o) { o.burgers.steps_out = 1; }},
              {"grf.scale", [](auto& o) { o.burgers.grf.scale = 600; }},
              {"grf.tau", [](auto& o) { o.burgers.grf.tau = 4; }},
              {"grf.alpha", [](auto& o) { o.burgers.grf.alpha = 2.5; }},
              {"train_samples", [](auto& o) { o.burgers.train_samples = 4; }},
              {"val_samples", [](auto& o) { o.burgers.val_samples = 1; }}};
    case FnoProblem::NavierStokes:
      return {{"grid", [](auto& o) { o.navier_stokes.grid = 8; }},
              {"solver_grid", [](auto& o) { o.navier_stokes.solver_grid = 32; }},
              {"viscosity", [](auto& o) { o.navier_stokes.viscosity = 1e-4; }},
              {"forcing_amplitude", [](auto& o) { o.navier_stokes.forcing_amplitude = 0.0; }},
              {"steps_in", [](auto& o) { o.navier_stokes.steps_in = 1; }},
              {"steps_out", [](auto& o) { o.navier_stokes.steps_out = 4; }},
              {"record_interval", [](auto& o) { o.navier_stokes.record_interval = 0.2; }},
              {"dt", [](auto& o) { o.navier_stokes.dt = 0.025; }},
              {"grf.scale", [](auto& o) { o.navier_stokes.grf.scale = 686; }},
              {"grf.tau", [](auto& o) { o.navier_stokes.grf.tau = 3; }},
              {"grf.alpha", [](auto& o) { o.navier_stokes.grf.alpha = 2; }},
              {"train_samples", [](auto& o) { o.navier_stokes.train_samples = 2; }},
              {"val_samples", [](auto& o) { o.navier_stokes.val_samples = 3; }}};
    case FnoProblem::RayleighBenard3d: {
      std::vector<Mutation> m = mutations(FnoProblem::RayleighBenard);
      m.emplace_back("ny", [](auto& o) { o.rayleigh_benard.ny = 16; });
      return m;
    }
    case FnoProblem::RayleighBenard:
      return {{"nx", [](auto& o) { o.rayleigh_benard.nx = 32; }},
              {"nz", [](auto& o) { o.rayleigh_benard.nz = 17; }},
              {"rayleigh", [](auto& o) { o.rayleigh_benard.rayleigh = 2e4; }},
              {"prandtl", [](auto& o) { o.rayleigh_benard.prandtl = 0.7; }},
              {"aspect", [](auto& o) { o.rayleigh_benard.aspect = 4; }},
              {"dt", [](auto& o) { o.rayleigh_benard.dt = 0.025; }},
              {"spinup_time", [](auto& o) { o.rayleigh_benard.spinup_time = 1; }},
              {"states", [](auto& o) { o.rayleigh_benard.states = 5; }},
              {"record_steps", [](auto& o) { o.rayleigh_benard.record_steps = 2; }},
              {"noise_amplitude", [](auto& o) { o.rayleigh_benard.noise_amplitude = 0.2; }},
              {"cfl_max", [](auto& o) { o.rayleigh_benard.cfl_max = 0.5; }},
              {"train_samples", [](auto& o) { o.rayleigh_benard.train_samples = 3; }},
              {"val_samples", [](auto& o) { o.rayleigh_benard.val_samples = 2; }}};
  }
  return {};
}

TEST(FnoDataCache, KeyChangesWithEveryParameterOfTheProblemAndNothingElse) {
  for (FnoProblem p : kProblems) {
    const FnoDataOptions base = tiny_options(p, "/a");
    const std::string id = config_id(base);
    EXPECT_EQ(id.size(), 12u);
    std::set<std::string> ids{id};
    for (const auto& [name, mutate] : mutations(p)) {
      FnoDataOptions o = base;
      mutate(o);
      const std::string other = config_id(o);
      EXPECT_NE(other, id) << problem_name(p) << ": changing " << name << " must change the key";
      EXPECT_TRUE(ids.insert(other).second)
          << problem_name(p) << ": " << name << " collides with another change";
    }
    FnoDataOptions seed = base;
    seed.seed = 6;
    EXPECT_NE(config_id(seed), id) << "the seed";
    // What does not decide the bytes: other problems' options, threads, paths, the commit.
    FnoDataOptions same = base;
    for (FnoProblem q : kProblems)
      if (q != p && !(is_rayleigh_benard(q) && is_rayleigh_benard(p)))  // those two share options
        for (const auto& [name, mutate] : mutations(q)) mutate(same);
    same.threads = 7;
    same.dataset_dir = "/elsewhere";
    same.code_commit = "other";
    EXPECT_EQ(config_id(same), id) << problem_name(p);
    EXPECT_EQ(data_paths(base).root, fs::path("/a") / (std::string("fno_") + problem_name(p)) / id);
    EXPECT_EQ(data_paths(base).partial.filename(), id + ".partial");
  }
  FnoDataOptions a = tiny_options(FnoProblem::Burgers, "/a"), b = a;
  b.problem = FnoProblem::NavierStokes;
  EXPECT_NE(config_id(a), config_id(b)) << "the problem";
}

TEST(FnoDataCache, LayoutsAndMetaRoundTrip) {
  TempDir dir;
  const FnoDataOptions ns = tiny_options(FnoProblem::NavierStokes, dir.path());
  const ProblemLayout l = problem_layout(ns);
  EXPECT_EQ(l.grid, (std::vector<int64_t>{16, 16}));
  ASSERT_EQ(l.files.size(), 2u);
  EXPECT_EQ(l.files[0].shape, (std::vector<int64_t>{2, 16, 16}));
  EXPECT_EQ(l.files[1].shape, (std::vector<int64_t>{3, 16, 16}));
  EXPECT_EQ(l.timesteps_per_example, 3);
  EXPECT_EQ(l.solver_steps_per_timestep, 2);
  EXPECT_EQ(l.solver_steps_per_sample, 10);
  const ProblemLayout r = problem_layout(tiny_options(FnoProblem::RayleighBenard, dir.path()));
  EXPECT_EQ(r.files[0].shape, (std::vector<int64_t>{4, 4, 16, 9}));
  EXPECT_EQ(r.examples_per_sample, 3);
  EXPECT_EQ(r.solver_steps_per_sample, 10 + 3);
  const ProblemLayout r3 = problem_layout(tiny_options(FnoProblem::RayleighBenard3d, dir.path()));
  EXPECT_EQ(r3.grid, (std::vector<int64_t>{8, 8, 9}));
  EXPECT_EQ(r3.files[0].shape, (std::vector<int64_t>{4, 5, 8, 8, 9}));
  EXPECT_EQ(r3.input_channels, (std::vector<std::string>{"u_x", "u_y", "u_z", "b", "p"}));
  EXPECT_EQ(r3.examples_per_sample, 3);
  FnoDataMeta m;
  m.config_id = config_id(ns);
  m.key_json = key_json(ns);
  m.problem = "navier_stokes";
  m.layout = l;
  m.train_samples = 3;
  m.val_samples = 2;
  m.input_stats = {{0.1, 0.2}, {1.0, 2.0}};
  m.target_stats = {{0.3, 0.4, 0.5}, {3.0, 4.0, 5.0}};
  m.dataset_sha256 = "ab";
  const FnoDataMeta back = parse_meta_json(meta_json(m), "meta");
  EXPECT_EQ(meta_json(back), meta_json(m));
  EXPECT_EQ(back.examples(FnoSplit::Val), 2);
  EXPECT_THROW(parse_meta_json("{}", "meta"), core::FileError);
}

TEST(FnoDataCache, ValidationNamesTheKey) {
  FnoDataOptions o = tiny_options(FnoProblem::NavierStokes, "/a");
  o.navier_stokes.dt = 0.03;  // 0.1 / 0.03 is not whole
  try {
    validate(o);
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ns_record_interval"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ns_dt"), std::string::npos) << e.what();
  }
  o = tiny_options(FnoProblem::Burgers, "/a");
  o.burgers.solver_grid = 48;
  EXPECT_THROW(validate(o), core::Error);
  EXPECT_THROW(parse_problem("darcy"), core::Error);
}

struct FnoDataGeneration : ::testing::TestWithParam<FnoProblem> {
  void SetUp() override { at::set_num_threads(1); }
};

TEST_P(FnoDataGeneration, ThreadsDoNotChangeTheBytesAndRerunsReuse) {
  TempDir a, b;
  FnoDataOptions o1 = tiny_options(GetParam(), a.path()), o2 = tiny_options(GetParam(), b.path());
  o2.threads = 2;
  const FnoDatasetInfo i1 = ensure_fno_dataset(world(), o1);
  const FnoDatasetInfo i2 = ensure_fno_dataset(world(), o2);
  EXPECT_FALSE(i1.reused);
  EXPECT_EQ(i1.samples_generated, i1.samples_total);
  const auto files = snapshot(i1.root);
  EXPECT_EQ(files.size(),
            1 + static_cast<std::size_t>(i1.samples_total) * problem_layout(o1).files.size());
  EXPECT_EQ(snapshot(i2.root), files) << "1 and 2 threads";
  EXPECT_EQ(i1.meta.dataset_sha256, i2.meta.dataset_sha256);
  const FnoDatasetInfo again = ensure_fno_dataset(world(), o1);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.samples_generated, 0);
  EXPECT_EQ(again.meta.dataset_sha256, i1.meta.dataset_sha256);
  FnoDataOptions other = o1;
  other.seed = 99;
  const FnoDatasetInfo i3 = ensure_fno_dataset(world(), other);
  EXPECT_NE(i3.root, i1.root);
  EXPECT_NE(i3.meta.dataset_sha256, i1.meta.dataset_sha256) << "another seed, other data";
}

TEST_P(FnoDataGeneration, AnInterruptedRunResumesWithWhatIsMissing) {
  TempDir a;
  const FnoDataOptions o = tiny_options(GetParam(), a.path());
  const ProblemLayout layout = problem_layout(o);
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  const auto reference = snapshot(first.root);
  // Make it look killed: back to .partial without meta.json, one sample gone, another truncated,
  // and a writer's temporary file left behind.
  const FnoDataPaths paths = data_paths(o);
  fs::rename(paths.root, paths.partial);
  fs::remove(paths.partial / "meta.json");
  const std::string name = layout.files.back().name;
  fs::remove(sample_path(paths.partial, FnoSplit::Train, 1, name));
  const fs::path damaged = sample_path(paths.partial, FnoSplit::Val, 0, layout.files.front().name);
  fs::resize_file(damaged, fs::file_size(damaged) - 8);
  const fs::path leftover =
      core::temporary_sibling(sample_path(paths.partial, FnoSplit::Train, 2, name));
  std::ofstream(leftover) << "junk";
  const fs::path untouched =
      sample_path(paths.partial, FnoSplit::Train, 0, layout.files.front().name);
  struct stat before {};
  ASSERT_EQ(::stat(untouched.c_str(), &before), 0);
  EXPECT_THROW(make_fno_sources(o), core::FileError) << "an unfinished dataset is never served";

  const FnoDatasetInfo resumed = ensure_fno_dataset(world(), o);
  EXPECT_FALSE(resumed.reused);
  EXPECT_EQ(resumed.samples_generated, 2) << "only the missing and the damaged sample";
  EXPECT_EQ(snapshot(resumed.root), reference)
      << "the resumed dataset equals the uninterrupted one";
  EXPECT_EQ(resumed.meta.dataset_sha256, first.meta.dataset_sha256);
  EXPECT_FALSE(fs::exists(paths.partial));
  EXPECT_FALSE(fs::exists(resumed.root / fs::relative(leftover, paths.partial)))
      << "temporary files are dropped";
  struct stat after {};
  ASSERT_EQ(::stat((resumed.root / fs::relative(untouched, paths.partial)).c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "a finished sample is kept, not rewritten";
}

TEST_P(FnoDataGeneration, StatisticsAndSourcesMatchTheFiles) {
  TempDir a;
  const FnoDataOptions o = tiny_options(GetParam(), a.path());
  EXPECT_THROW(make_fno_sources(o), core::FileError);
  const FnoDatasetInfo info = ensure_fno_dataset(world(), o);
  const FnoSources s = make_fno_sources(o);
  const ProblemLayout& l = s.meta.layout;
  ASSERT_EQ(s.train->size(),
            static_cast<std::size_t>(sample_count(o, FnoSplit::Train) * l.examples_per_sample));
  ASSERT_EQ(s.val->size(),
            static_cast<std::size_t>(sample_count(o, FnoSplit::Val) * l.examples_per_sample));
  // Recompute the statistics from the sources' examples (every example, in double).
  const std::size_t c_in = l.input_channels.size(), c_out = l.target_channels.size();
  std::vector<double> sum(c_in + c_out, 0.0), sq(c_in + c_out, 0.0);
  double cells = 0.0;
  for (std::size_t i = 0; i < s.train->size(); ++i) {
    const data::Example e = s.train->get(i, 0);
    ASSERT_EQ(e.fields.size(), 2u);
    std::vector<int64_t> in_shape{static_cast<int64_t>(c_in)},
        out_shape{static_cast<int64_t>(c_out)};
    for (int64_t g : l.grid) {
      in_shape.push_back(g);
      out_shape.push_back(g);
    }
    ASSERT_EQ(e.fields[0].sizes().vec(), in_shape) << e.id;
    ASSERT_EQ(e.fields[1].sizes().vec(), out_shape) << e.id;
    ASSERT_EQ(e.fields[0].scalar_type(), at::kFloat);
    const at::Tensor in = e.fields[0].to(at::kDouble).flatten(1),
                     out = e.fields[1].to(at::kDouble).flatten(1);
    for (std::size_t c = 0; c < c_in; ++c) {
      sum[c] += in[c].sum().item<double>();
      sq[c] += (in[c] * in[c]).sum().item<double>();
    }
    for (std::size_t c = 0; c < c_out; ++c) {
      sum[c_in + c] += out[c].sum().item<double>();
      sq[c_in + c] += (out[c] * out[c]).sum().item<double>();
    }
    cells += static_cast<double>(in.size(1));
  }
  for (std::size_t c = 0; c < c_in + c_out; ++c) {
    const FnoChannelStats& st = c < c_in ? s.meta.input_stats : s.meta.target_stats;
    const std::size_t k = c < c_in ? c : c - c_in;
    const double mean = sum[c] / cells, sd = std::sqrt(sq[c] / cells - mean * mean);
    EXPECT_NEAR(st.mean[k], mean, 1e-9 * (std::abs(mean) + sd)) << "channel " << c;
    EXPECT_NEAR(st.std[k], sd, 1e-7 * sd) << "channel " << c;
  }
  EXPECT_GT(s.meta.target_stats.std[0], 0.0);
  // Examples are the files' slices.
  const fs::path file = sample_path(info.root, FnoSplit::Val, 0, l.files[0].name);
  std::vector<int64_t> shape;
  const std::vector<float> data = core::read_npy<float>(file, &shape);
  const at::Tensor whole = at::tensor(data, at::kFloat).reshape(shape);
  const data::Example last = s.val->get(s.val->size() - 1, 0);
  if (l.files.size() == 1) {
    EXPECT_TRUE(at::equal(last.fields[0], whole[shape[0] - 2]));
    EXPECT_TRUE(at::equal(last.fields[1], whole[shape[0] - 1]));
    EXPECT_EQ(last.id, "val/0@" + std::to_string(shape[0] - 2));
  } else {
    const data::Example first = s.val->get(0, 0);
    EXPECT_TRUE(at::equal(first.fields[0], whole));
    EXPECT_EQ(first.id, "val/0");
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, FnoDataGeneration,
                         ::testing::Values(FnoProblem::Burgers, FnoProblem::NavierStokes,
                                           FnoProblem::RayleighBenard,
                                           FnoProblem::RayleighBenard3d),
                         [](const auto& p) { return std::string(problem_name(p.param)); });

TEST(FnoDataFailures, AnUnstableTimeStepFailsNamingTheKeyAndLeavesNoDataset) {
  at::set_num_threads(1);
  TempDir a;
  FnoDataOptions o = tiny_options(FnoProblem::NavierStokes, a.path());
  o.navier_stokes.viscosity = 1e-5;
  o.navier_stokes.grf.scale = 1e7;  // a strong field ...
  o.navier_stokes.dt = 0.1;         // ... and a step far past the CFL limit
  o.navier_stokes.record_interval = 0.1;
  try {
    ensure_fno_dataset(world(), o);
    FAIL() << "no error";
  } catch (const dist::AgreedError& e) {
    EXPECT_NE(std::string(e.what()).find("ns_dt"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(data_paths(o).root));
  EXPECT_THROW(make_fno_sources(o), core::FileError);
}

TEST(FnoDataFailures, APartialFolderOfAnotherKeyIsStartedAgain) {
  at::set_num_threads(1);
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::Burgers, a.path());
  const FnoDataPaths paths = data_paths(o);
  fs::create_directories(paths.partial / "train");
  std::ofstream(paths.partial / "key.json") << "{\"not\":\"ours\"}";
  std::ofstream(paths.partial / "train" / "000000_input.npy") << "stale";
  const FnoDatasetInfo info = ensure_fno_dataset(world(), o);
  EXPECT_EQ(info.samples_generated, info.samples_total);
  EXPECT_EQ(snapshot(info.root).count("key.json"), 1u);
  EXPECT_EQ(core::read_file(info.root / "key.json"), key_json(o));
}

// Reusing a complete dataset: its files are checked against meta.json (per-file SHA-256s, or the
// whole-dataset digest of an older meta.json) and for finite values; a folder whose meta.json
// cannot be trusted is generated again under the lock.
struct FnoDataReuse : fno::test::SingleThreaded {};

float float_at(const fs::path& file, int64_t k) {
  std::vector<int64_t> shape;
  return core::read_npy<float>(file, &shape).at(static_cast<std::size_t>(k));
}

// Overwrites element `k` of a float32 .npy in place: same size, header untouched.
void poke_float(const fs::path& file, int64_t k, float value) {
  const core::NpyInfo info = core::read_npy_info(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(info.data_offset + 4 * static_cast<std::size_t>(k)));
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
  ASSERT_TRUE(f.good()) << file;
}

// SHA-256 over the hex SHA-256s of every file in (split, index, file) order, computed here.
std::string whole_dataset_digest(const fs::path& root, const FnoDataOptions& o) {
  std::string hexes;
  for (FnoSplit split : {FnoSplit::Train, FnoSplit::Val})
    for (int64_t i = 0; i < sample_count(o, split); ++i)
      for (const auto& f : problem_layout(o).files)
        hexes += core::sha256_hex(core::read_file(sample_path(root, split, i, f.name)));
  return core::sha256_hex(hexes);
}

// Rewrites meta.json as a scaffold without per-file digests wrote it, with `root`'s digest.
void write_older_meta(const fs::path& root, const FnoDataOptions& o) {
  nlohmann::json j = nlohmann::json::parse(core::read_file(root / "meta.json"));
  j.erase("file_sha256");
  j.erase("meta_sha256");
  j["dataset_sha256"] = whole_dataset_digest(root, o);
  std::ofstream(root / "meta.json") << j.dump(2) << "\n";
}

std::string reuse_error(const FnoDataOptions& o) {
  try {
    ensure_fno_dataset(world(), o);
  } catch (const dist::AgreedError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the damaged dataset was reused";
  return "";
}

TEST_F(FnoDataReuse, AFileEditedInPlaceIsRefusedNamingIt) {
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::Burgers, a.path());
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  const fs::path edited = sample_path(first.root, FnoSplit::Val, 1, "target");
  const auto size = fs::file_size(edited);
  poke_float(edited, 5, float_at(edited, 5) + 0.25f);  // finite, same size
  ASSERT_EQ(fs::file_size(edited), size);
  const std::string what = reuse_error(o);
  EXPECT_NE(what.find("val/000001_target.npy"), std::string::npos) << what;
  EXPECT_NE(what.find("SHA-256"), std::string::npos) << what;
  EXPECT_EQ(what.find("train/"), std::string::npos) << "only the edited file is named: " << what;
  EXPECT_EQ(what.find("val/000000"), std::string::npos)
      << "only the edited file is named: " << what;
  EXPECT_TRUE(fs::exists(edited)) << "a refused dataset is left as it was";
  EXPECT_FALSE(fs::exists(data_paths(o).partial));
}

TEST_F(FnoDataReuse, ANonFiniteValueIsRefusedNamingTheFileEvenWhenTheDigestsAgree) {
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::Burgers, a.path());
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    const fs::path file = sample_path(first.root, FnoSplit::Train, 2, "input");
    const float kept = float_at(file, 3);
    poke_float(file, 3, bad);
    write_older_meta(first.root, o);  // digests that agree with the damaged file
    const std::string what = reuse_error(o);
    EXPECT_NE(what.find("train/000002_input.npy"), std::string::npos) << what;
    EXPECT_NE(what.find(std::isnan(bad) ? "nan" : "-inf"), std::string::npos) << what;
    poke_float(file, 3, kept);
  }
}

TEST_F(FnoDataReuse, AnOlderMetaJsonWithoutPerFileDigestsIsReusedAndStillChecked) {
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::NavierStokes, a.path());
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  write_older_meta(first.root, o);
  const FnoDatasetInfo again = ensure_fno_dataset(world(), o);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.meta.dataset_sha256, first.meta.dataset_sha256);
  const fs::path edited = sample_path(first.root, FnoSplit::Train, 0, "target");
  poke_float(edited, 7, float_at(edited, 7) * 2.0f + 1.0f);
  const std::string what = reuse_error(o);
  EXPECT_NE(what.find("dataset_sha256"), std::string::npos) << what;
  EXPECT_NE(what.find(first.root.string()), std::string::npos) << what;
}

struct MetaDamage {
  const char* name;
  std::function<void(const fs::path&)> damage;
};
void PrintTo(const MetaDamage& d, std::ostream* os) {
  *os << d.name;
}
struct FnoDataDamagedMeta : ::testing::TestWithParam<MetaDamage> {
  void SetUp() override { at::set_num_threads(1); }
};

TEST_P(FnoDataDamagedMeta, IsGeneratedAgainUnderTheLockAndLeavesNoPartialFolder) {
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::Burgers, a.path());
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  const auto reference = snapshot(first.root);
  GetParam().damage(first.root / "meta.json");
  const FnoDatasetInfo again = ensure_fno_dataset(world(), o);
  EXPECT_FALSE(again.reused);
  EXPECT_EQ(again.samples_generated, again.samples_total);
  EXPECT_EQ(snapshot(again.root), reference);
  EXPECT_EQ(again.meta.dataset_sha256, first.meta.dataset_sha256);
  EXPECT_FALSE(fs::exists(data_paths(o).partial)) << "no .partial folder left on success";
  EXPECT_TRUE(ensure_fno_dataset(world(), o).reused) << "the new meta.json is trusted";
}

INSTANTIATE_TEST_SUITE_P(
    Damages, FnoDataDamagedMeta,
    ::testing::Values(
        MetaDamage{"truncated",
                   [](const fs::path& m) { fs::resize_file(m, fs::file_size(m) / 2); }},
        MetaDamage{"deleted", [](const fs::path& m) { fs::remove(m); }},
        MetaDamage{"garbage", [](const fs::path& m) { std::ofstream(m) << "{\"format_version\""; }},
        MetaDamage{"another_key",
                   [](const fs::path& m) {
                     nlohmann::json j = nlohmann::json::parse(core::read_file(m));
                     j["key"]["seed"] = 6;
                     std::ofstream(m) << j.dump(2) << "\n";
                   }},
        MetaDamage{"edited_statistics",
                   [](const fs::path& m) {
                     nlohmann::json j = nlohmann::json::parse(core::read_file(m));
                     j["input_stats"]["mean"][0] = 0.5;
                     std::ofstream(m) << j.dump(2) << "\n";
                   }}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(FnoDataReuse, ANonFiniteSampleOfAnUnfinishedDatasetIsMadeAgain) {
  TempDir a;
  const FnoDataOptions o = tiny_options(FnoProblem::Burgers, a.path());
  const FnoDatasetInfo first = ensure_fno_dataset(world(), o);
  const auto reference = snapshot(first.root);
  const FnoDataPaths paths = data_paths(o);
  fs::rename(paths.root, paths.partial);
  fs::remove(paths.partial / "meta.json");
  poke_float(sample_path(paths.partial, FnoSplit::Train, 1, "target"), 4,
             std::numeric_limits<float>::quiet_NaN());
  const FnoDatasetInfo resumed = ensure_fno_dataset(world(), o);
  EXPECT_EQ(resumed.samples_generated, 1) << "the sample holding a NaN";
  EXPECT_EQ(snapshot(resumed.root), reference);
}

}  // namespace
}  // namespace scaffold::fno
