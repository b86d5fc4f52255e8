// Keys, layouts and meta.json of the FNO dataset cache. nlohmann's object keeps keys sorted and
// dump() is compact and writes doubles as the shortest text that reads back exactly, so the key
// text, and with it the id, is a function of the values alone.
#include "workloads/fno/data/cache.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/sha256.hpp"

namespace scaffold::fno {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMetaDigestKey = "meta_sha256";

int64_t steps_in(double interval, double dt) {
  return static_cast<int64_t>(std::llround(interval / dt));
}

json grf_json(const GrfOptions& g) {
  return json{{"alpha", g.alpha}, {"scale", g.scale}, {"tau", g.tau}};
}

json problem_json(const FnoDataOptions& o) {
  switch (o.problem) {
    case FnoProblem::Burgers: {
      const auto& b = o.burgers;
      return json{{"grid", b.grid},
                  {"solver_grid", b.solver_grid},
                  {"viscosity", b.viscosity},
                  {"final_time", b.final_time},
                  {"dt", b.dt},
                  {"steps_out", b.steps_out},
                  {"grf", grf_json(b.grf)},
                  {"train_samples", b.train_samples},
                  {"val_samples", b.val_samples}};
    }
    case FnoProblem::NavierStokes: {
      const auto& n = o.navier_stokes;
      return json{{"grid", n.grid},
                  {"solver_grid", n.solver_grid},
                  {"viscosity", n.viscosity},
                  {"forcing_amplitude", n.forcing_amplitude},
                  {"steps_in", n.steps_in},
                  {"steps_out", n.steps_out},
                  {"record_interval", n.record_interval},
                  {"dt", n.dt},
                  {"grf", grf_json(n.grf)},
                  {"train_samples", n.train_samples},
                  {"val_samples", n.val_samples}};
    }
    case FnoProblem::RayleighBenard:
    case FnoProblem::RayleighBenard3d: {
      const auto& r = o.rayleigh_benard;
      json j{{"nx", r.nx},
             {"nz", r.nz},
             {"rayleigh", r.rayleigh},
             {"prandtl", r.prandtl},
             {"aspect", r.aspect},
             {"dt", r.dt},
             {"spinup_time", r.spinup_time},
             {"states", r.states},
             {"record_steps", r.record_steps},
             {"noise_amplitude", r.noise_amplitude},
             {"cfl_max", r.cfl_max},
             {"train_samples", r.train_samples},
             {"val_samples", r.val_samples}};
      if (o.problem == FnoProblem::RayleighBenard3d)
        j["ny"] = r.ny;  // rbc2d's keys stay as they were
      return j;
    }
  }
  return json::object();
}

std::vector<std::string> numbered(const std::string& stem, int64_t first, int64_t count) {
  std::vector<std::string> names;
  for (int64_t k = 0; k < count; ++k) names.push_back(fmt::format("{}{}", stem, first + k));
  return names;
}

json layout_json(const ProblemLayout& l) {
  json files = json::array();
  for (const auto& f : l.files) files.push_back(json{{"name", f.name}, {"shape", f.shape}});
  return json{{"grid", l.grid},
              {"input_channels", l.input_channels},
              {"target_channels", l.target_channels},
              {"files_per_sample", files},
              {"examples_per_sample", l.examples_per_sample},
              {"timesteps_per_example", l.timesteps_per_example},
              {"time_per_timestep", l.time_per_timestep},
              {"solver_steps_per_timestep", l.solver_steps_per_timestep},
              {"solver_steps_per_sample", l.solver_steps_per_sample}};
}

ProblemLayout layout_from_json(const json& j) {
  ProblemLayout l;
  l.grid = j.at("grid").get<std::vector<int64_t>>();
  l.input_channels = j.at("input_channels").get<std::vector<std::string>>();
  l.target_channels = j.at("target_channels").get<std::vector<std::string>>();
  for (const auto& f : j.at("files_per_sample"))
    l.files.push_back(
        SampleFile{f.at("name").get<std::string>(), f.at("shape").get<std::vector<int64_t>>()});
  l.examples_per_sample = j.at("examples_per_sample").get<int64_t>();
  l.timesteps_per_example = j.at("timesteps_per_example").get<int64_t>();
  l.time_per_timestep = j.at("time_per_timestep").get<double>();
  l.solver_steps_per_timestep = j.at("solver_steps_per_timestep").get<int64_t>();
  l.solver_steps_per_sample = j.at("solver_steps_per_sample").get<int64_t>();
  return l;
}

// The examples and timing of a trajectory of stored states (both Rayleigh-Benard problems).
void rbc_timing(const RayleighBenardOptions& r, ProblemLayout* l) {
  l->examples_per_sample = r.states - 1;
  l->time_per_timestep = r.dt * static_cast<double>(r.record_steps);
  l->solver_steps_per_timestep = r.record_steps;
  l->solver_steps_per_sample = steps_in(r.spinup_time, r.dt) + (r.states - 1) * r.record_steps;
}

}  // namespace

ProblemLayout problem_layout(const FnoDataOptions& o) {
  ProblemLayout l;
  switch (o.problem) {
    case FnoProblem::Burgers: {
      const auto& b = o.burgers;
      l.grid = {b.grid};
      l.input_channels = {"u_t0"};
      l.target_channels = numbered("u_t", 1, b.steps_out);
      l.files = {{"input", {1, b.grid}}, {"target", {b.steps_out, b.grid}}};
      l.timesteps_per_example = b.steps_out;
      l.time_per_timestep = b.final_time / static_cast<double>(b.steps_out);
      l.solver_steps_per_timestep = steps_in(l.time_per_timestep, b.dt);
      l.solver_steps_per_sample = l.solver_steps_per_timestep * b.steps_out;
      break;
    }
    case FnoProblem::NavierStokes: {
      const auto& n = o.navier_stokes;
      l.grid = {n.grid, n.grid};
      l.input_channels = numbered("w_t", 1, n.steps_in);
      l.target_channels = numbered("w_t", n.steps_in + 1, n.steps_out);
      l.files = {{"input", {n.steps_in, n.grid, n.grid}},
                 {"target", {n.steps_out, n.grid, n.grid}}};
      l.timesteps_per_example = n.steps_out;
      l.time_per_timestep = n.record_interval;
      l.solver_steps_per_timestep = steps_in(n.record_interval, n.dt);
      l.solver_steps_per_sample = (n.steps_in + n.steps_out) * l.solver_steps_per_timestep;
      break;
    }
    case FnoProblem::RayleighBenard: {
      const auto& r = o.rayleigh_benard;
      l.grid = {r.nx, r.nz};
      l.input_channels = l.target_channels = {"u_x", "u_z", "b", "p"};
      l.files = {{"states", {r.states, 4, r.nx, r.nz}}};
      rbc_timing(r, &l);
      break;
    }
    case FnoProblem::RayleighBenard3d: {
      const auto& r = o.rayleigh_benard;
      l.grid = {r.nx, r.ny, r.nz};
      l.input_channels = l.target_channels = {"u_x", "u_y", "u_z", "b", "p"};
      l.files = {{"states", {r.states, 5, r.nx, r.ny, r.nz}}};
      rbc_timing(r, &l);
      break;
    }
  }
  return l;
}
int64_t sample_count(const FnoDataOptions& o, FnoSplit split) {
  const bool train = split == FnoSplit::Train;
  switch (o.problem) {
    case FnoProblem::Burgers:
      return train ? o.burgers.train_samples : o.burgers.val_samples;
    case FnoProblem::NavierStokes:
      return train ? o.navier_stokes.train_samples : o.navier_stokes.val_samples;
    case FnoProblem::RayleighBenard:
    case FnoProblem::RayleighBenard3d:
      return train ? o.rayleigh_benard.train_samples : o.rayleigh_benard.val_samples;
  }
  return 0;
}

std::string key_json(const FnoDataOptions& o) {
  json j;
  j["format_version"] = kFnoDataFormatVersion;
  j["generator"] = kFnoGenerator;
  j["problem"] = problem_name(o.problem);
  j["seed"] = o.seed;
  j[problem_name(o.problem)] = problem_json(o);
  return j.dump();
}

std::string config_id(const FnoDataOptions& o) {
  return core::sha256_hex(key_json(o)).substr(0, 12);
}

FnoDataPaths data_paths(const FnoDataOptions& o) {
  FnoDataPaths p;
  const std::string id = config_id(o);
  p.problem_dir = o.dataset_dir / (std::string("fno_") + problem_name(o.problem));
  p.root = p.problem_dir / id;
  p.partial = p.problem_dir / (id + ".partial");
  p.lock = p.problem_dir / (id + ".lock");
  return p;
}

fs::path sample_path(const fs::path& root, FnoSplit split, int64_t index, const std::string& name) {
  return root / split_name(split) / fmt::format("{:06d}_{}.npy", index, name);
}

std::string sample_name(FnoSplit split, int64_t index, const std::string& name) {
  return fmt::format("{}/{:06d}_{}.npy", split_name(split), index, name);
}

std::string layout_text(const ProblemLayout& layout) {
  return layout_json(layout).dump();
}

std::string meta_json(const FnoDataMeta& m) {
  json j;
  j["format_version"] = m.format_version;
  j["generator"] = m.generator;
  j["config_id"] = m.config_id;
  j["key"] = json::parse(m.key_json);
  j["problem"] = m.problem;
  j["code_commit"] = m.code_commit;
  j["created_at"] = m.created_at;
  j["layout"] = layout_json(m.layout);
  j["train_samples"] = m.train_samples;
  j["val_samples"] = m.val_samples;
  j["train_examples"] = m.examples(FnoSplit::Train);
  j["val_examples"] = m.examples(FnoSplit::Val);
  j["input_stats"] = json{{"mean", m.input_stats.mean}, {"std", m.input_stats.std}};
  j["target_stats"] = json{{"mean", m.target_stats.mean}, {"std", m.target_stats.std}};
  j["dataset_sha256"] = m.dataset_sha256;
  if (!m.file_sha256.empty()) j["file_sha256"] = m.file_sha256;
  j["solver_steps"] = m.solver_steps;
  j["generation_s"] = m.generation_s;
  j[kMetaDigestKey] = core::sha256_hex(j.dump());
  return j.dump(2) + "\n";
}

FnoDataMeta parse_meta_json(const std::string& text, const std::string& source) {
  FnoDataMeta m;
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw core::FileError(source, "not a dataset meta.json: not an object");
    if (j.contains(kMetaDigestKey)) {
      m.meta_sha256_recorded = j.at(kMetaDigestKey).get<std::string>();
      j.erase(kMetaDigestKey);
    }
    // nlohmann keeps keys sorted and writes doubles as the shortest text that reads back exactly,
    // so the compact dump of what was parsed is the text meta_json hashed.
    m.meta_sha256_actual = core::sha256_hex(j.dump());
    m.format_version = j.at("format_version").get<int>();
    m.generator = j.at("generator").get<std::string>();
    if (m.format_version != kFnoDataFormatVersion || m.generator != kFnoGenerator)
      throw core::FileError(
          source, fmt::format("format {} of '{}', expected format {} of '{}'", m.format_version,
                              m.generator, kFnoDataFormatVersion, kFnoGenerator));
    m.config_id = j.at("config_id").get<std::string>();
    m.key_json = j.at("key").dump();
    m.problem = j.at("problem").get<std::string>();
    m.code_commit = j.at("code_commit").get<std::string>();
    m.created_at = j.at("created_at").get<std::string>();
    m.layout = layout_from_json(j.at("layout"));
    m.train_samples = j.at("train_samples").get<int64_t>();
    m.val_samples = j.at("val_samples").get<int64_t>();
    m.input_stats = {j.at("input_stats").at("mean").get<std::vector<double>>(),
                     j.at("input_stats").at("std").get<std::vector<double>>()};
    m.target_stats = {j.at("target_stats").at("mean").get<std::vector<double>>(),
                      j.at("target_stats").at("std").get<std::vector<double>>()};
    m.dataset_sha256 = j.at("dataset_sha256").get<std::string>();
    if (j.contains("file_sha256"))
      m.file_sha256 = j.at("file_sha256").get<std::map<std::string, std::string>>();
    m.solver_steps = j.at("solver_steps").get<int64_t>();
    m.generation_s = j.at("generation_s").get<double>();
  } catch (const json::exception& e) {
    throw core::FileError(source, std::string("not a dataset meta.json: ") + e.what());
  }
  return m;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace scaffold::fno
