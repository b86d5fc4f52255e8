// Internal to config/: the FNO data keys as schema entries of any struct C that holds a
// FnoDataConfig — FnoDataConfig itself for `scaffold generate_pde_data`, and the FNO benchmark's
// struct, which can append the generator keys to its own table so both read them alike:
//   append_fno_data_keys<FnoConfig>(t, &data_of, &view_of, kFnoSharedDataKeys);
// `data` gives the FnoDataConfig inside a C (where the keys are stored); `view` the complete
// FnoDataConfig a C stands for (its own copies of skipped keys filled in), which the range and
// cross-key checks read, so a check that spans a skipped key (burgers_dt against t_out) still
// sees C's value.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "config/schema_rules.hpp"
#include "workloads/fno/data/config.hpp"

namespace scaffold::config {

// The keys FnoDataConfig shares with the FNO benchmark's config (same names and meaning).
inline const std::vector<std::string> kFnoSharedDataKeys{"problem", "data_dir",      "seed",
                                                         "grid",    "train_samples", "val_samples",
                                                         "t_in",    "t_out",         "viscosity"};

template <class C>
using FnoDataAccess = FnoDataConfig& (*)(C&);
template <class C>
using FnoDataView = FnoDataConfig (*)(const C&);

namespace fno_keys {

using D = FnoDataConfig;

// Like rules::bind_key, storing through `data` and checking the value `view` shows.
// `help` and `allowed` are moved into the entry; clang-tidy 14 misses the std::move in the
// instantiations.
template <class C, typename T>
KeySpecT<C> bind_data(FnoDataAccess<C> data, FnoDataView<C> view, const char* name, T D::*member,
                      // NOLINTNEXTLINE(performance-unnecessary-value-param)
                      std::string help, std::string allowed, bool (*ok)(const T&) = nullptr) {
  KeySpecT<C> spec;
  spec.name = name;
  spec.kind = rules::kind_of<T>();
  spec.help = std::move(help);
  spec.allowed = std::move(allowed);
  spec.assign = [data, member](const KeySpecT<C>& s, C& c, const RawValue& v) {
    return rules::store(s, data(c).*member, v);
  };
  spec.format = [view, member](const KeySpecT<C>& s, const C& c) {
    return rules::format_value(s, view(c).*member);
  };
  spec.check = [view, member, ok, text = spec.allowed](const C& c) {
    return ok == nullptr || ok(view(c).*member) ? std::string() : text;
  };
  if constexpr (std::is_same_v<T, std::string>)
    spec.path = [data, member](C& c) -> std::string& { return data(c).*member; };
  return spec;
}

inline bool positive(const double& v) {
  return v > 0.0;
}
inline bool non_negative(const double& v) {
  return v >= 0.0;
}
inline bool at_least_1(const int& v) {
  return v >= 1;
}
inline bool refinement(const int& v) {
  return v >= 1 && v <= 64;
}
inline bool seed(const int64_t& v) {
  return v >= 0;
}
inline bool grid(const std::vector<int>& v) {
  if (v.empty() || v.size() > 3) return false;
  for (int n : v)
    if (n < 4 || n > (1 << 20)) return false;
  return true;
}

// "" when `interval` is a whole number (>= 1) of `dt` steps, else what is expected.
inline std::string multiple_of(double interval, const std::string& interval_text, double dt,
                               const char* dt_key) {
  const double ratio = interval / dt;
  if (std::round(ratio) >= 1.0 &&
      std::abs(ratio - std::round(ratio)) <= 1e-9 * std::max(1.0, ratio))
    return "";
  return fmt::format("a step dividing {} = {} into whole steps; {} / {} = {} / {} = {}",
                     interval_text, interval, interval_text, dt_key, interval, dt, ratio);
}

inline std::string grid_for_problem(const D& d) {
  const auto& g = d.grid;
  if (d.problem == "burgers1d")
    return g.size() == 1 && g[0] % 2 == 0 ? "" : "one even entry [N] for burgers1d";
  if (d.problem == "navier_stokes2d")
    return g.size() == 2 && g[0] == g[1] && g[0] % 2 == 0 && g[0] <= 8192
               ? ""
               : "two equal even entries [N, N] (N <= 8192) for navier_stokes2d";
  if (d.problem == "rbc2d")
    return g.size() == 2 && g[0] % 2 == 0 && g[0] >= 8 && g[0] <= 8192 && g[1] >= 8 && g[1] <= 1024
               ? ""
               : "two entries [nx, nz] for rbc2d: nx even in [8, 8192], nz in [8, 1024]";
  if (d.problem == "rbc3d")
    return g.size() == 3 && g[0] % 2 == 0 && g[0] >= 8 && g[0] <= 4096 && g[1] % 2 == 0 &&
                   g[1] >= 8 && g[1] <= 4096 && g[2] >= 8 && g[2] <= 1024
               ? ""
               : "three entries [nx, ny, nz] for rbc3d: nx and ny even in [8, 4096], nz in [8, "
                 "1024]";
  if (g.size() > 2) return "at most two entries for " + d.problem;
  return "";
}

}  // namespace fno_keys

// Appends the FNO data keys (in FnoDataConfig's order) to `t`, except those named in `skip`.
template <class C>
void append_fno_data_keys(std::vector<KeySpecT<C>>& t, FnoDataAccess<C> data, FnoDataView<C> view,
                          const std::vector<std::string>& skip = {}) {
  using D = FnoDataConfig;
  namespace k = fno_keys;
  // Adds one key; `deps` and `cross` (may be null) make its cross-key check.
  // `deps` is moved into the entry when there is a cross check.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  auto add = [&](KeySpecT<C> spec, std::vector<std::string> deps = {},
                 std::string(*cross)(const D&) = nullptr) {
    for (const auto& name : skip)
      if (name == spec.name) return static_cast<KeySpecT<C>*>(nullptr);
    if (cross != nullptr) {
      spec.depends_on = std::move(deps);
      spec.cross_check = [view, cross](const C& c) { return cross(view(c)); };
    }
    t.push_back(std::move(spec));
    return &t.back();
  };
  auto key = [&](const char* name, auto D::*member, std::string help, std::string allowed,
                 auto ok) {
    return k::bind_data<C>(data, view, name, member, std::move(help), std::move(allowed), ok);
  };
  const char* positive = "a number > 0";
  const char* count = "an integer >= 1";

  // Shared with the FNO benchmark.
  if (auto* s = add(key("problem", &D::problem,
                        "the PDE: burgers1d (viscous Burgers, u(0) -> u(T)), navier_stokes2d "
                        "(vorticity on the unit "
                        "torus, t_in records -> the next t_out), rbc2d and rbc3d (2-D and 3-D "
                        "Rayleigh-Benard convection, t_in states -> the next t_out)",
                        "one of burgers1d, navier_stokes2d, rbc2d, rbc3d",
                        static_cast<bool (*)(const std::string&)>(nullptr))))
    s->choices = {"burgers1d", "navier_stokes2d", "rbc2d", "rbc3d"};
  if (auto* s = add(key("data_dir", &D::data_dir, "cache directory of the generated PDE datasets",
                        "a non-empty path", rules::non_empty)))
    s->absolute_path = true;
  add(key("seed", &D::seed, "the single seed for everything", "an integer >= 0", k::seed));
  if (auto* s = add(
          key("grid", &D::grid, "grid points per spatial dimension; the problem fixes how many",
              "a list of 1 to 3 integers in [4, 1048576]", k::grid),
          {"problem"}, +[](const D& d) { return k::grid_for_problem(d); })) {
    s->list_min = 1;
    s->list_max = 3;
  }
  add(key("train_samples", &D::train_samples,
          "training examples (rbc2d/3d: enough trajectories of rbc_states states are generated)",
          count, k::at_least_1));
  add(key("val_samples", &D::val_samples, "validation examples", count, k::at_least_1));
  add(
      key("t_in", &D::t_in,
          "input time steps per example (the input channels; rbc2d: 4 per step, rbc3d: 5)", count,
          k::at_least_1),
      {"problem"}, +[](const D& d) {
        return d.problem != "burgers1d" || d.t_in == 1
                   ? std::string()
                   : std::string("1 for burgers1d (u at t = 0)");
      });
  add(key("t_out", &D::t_out,
          "predicted time steps per example (the output channels; rbc2d: 4 per step, rbc3d: 5)",
          count, k::at_least_1));
  add(
      key("viscosity", &D::viscosity,
          "viscosity; 0: the problem's default (burgers1d 0.1, navier_stokes2d 1e-3); rbc2d and "
          "rbc3d take rbc_rayleigh and rbc_prandtl instead",
          "a number >= 0", k::non_negative),
      {"problem"}, +[](const D& d) {
        return (d.problem != "rbc2d" && d.problem != "rbc3d") || d.viscosity == 0.0
                   ? std::string()
                   : std::string(
                         "0 for rbc2d and rbc3d (their viscosity is sqrt(Pr / Ra): set "
                         "rbc_rayleigh, "
                         "rbc_prandtl)");
      });

  // burgers1d.
  add(key("burgers_solver_refinement", &D::burgers_solver_refinement,
          "burgers1d: the solver's grid is this many times finer; stored fields take every "
          "this-many-th point (the "
          "paper: 8192 / 1024)",
          "an integer in [1, 64]", k::refinement));
  add(key("burgers_final_time", &D::burgers_final_time,
          "burgers1d: time of the last target snapshot", positive, k::positive));
  add(
      key("burgers_dt", &D::burgers_dt, "burgers1d: ETDRK4 time step", positive, k::positive),
      {"problem", "burgers_final_time", "t_out"}, +[](const D& d) {
        if (d.problem != "burgers1d") return std::string();
        return k::multiple_of(d.burgers_final_time / d.t_out, "burgers_final_time / t_out",
                              d.burgers_dt, "burgers_dt");
      });
  add(key("burgers_grf_scale", &D::burgers_grf_scale,
          "burgers1d: initial condition, a Gaussian random field of covariance scale (-Laplacian + "
          "tau^2)^-alpha",
          positive, k::positive));
  add(key("burgers_grf_tau", &D::burgers_grf_tau, "burgers1d: tau of the initial GRF", positive,
          k::positive));
  add(key("burgers_grf_alpha", &D::burgers_grf_alpha, "burgers1d: alpha of the initial GRF",
          positive, k::positive));

  // navier_stokes2d.
  add(key("ns_solver_refinement", &D::ns_solver_refinement,
          "navier_stokes2d: the solver's grid is this many times finer per side; stored fields are "
          "subsampled (the "
          "paper: 256 / 64)",
          "an integer in [1, 64]", k::refinement));
  add(key("ns_forcing_amplitude", &D::ns_forcing_amplitude,
          "navier_stokes2d: a in the forcing a (sin 2pi(x+y) + cos 2pi(x+y)); 0: unforced",
          "a number >= 0", k::non_negative));
  add(key("ns_record_interval", &D::ns_record_interval, "navier_stokes2d: time between records",
          positive, k::positive));
  add(
      key("ns_dt", &D::ns_dt, "navier_stokes2d: ETDRK4 time step", positive, k::positive),
      {"problem", "ns_record_interval"}, +[](const D& d) {
        return d.problem != "navier_stokes2d"
                   ? std::string()
                   : k::multiple_of(d.ns_record_interval, "ns_record_interval", d.ns_dt, "ns_dt");
      });
  add(key("ns_grf_scale", &D::ns_grf_scale,
          "navier_stokes2d: initial vorticity, a Gaussian random field of covariance scale "
          "(-Laplacian + "
          "tau^2)^-alpha",
          positive, k::positive));
  add(key("ns_grf_tau", &D::ns_grf_tau, "navier_stokes2d: tau of the initial GRF", positive,
          k::positive));
  add(key("ns_grf_alpha", &D::ns_grf_alpha, "navier_stokes2d: alpha of the initial GRF", positive,
          k::positive));

  // rbc2d and rbc3d.
  add(key("rbc_rayleigh", &D::rbc_rayleigh,
          "rbc2d, rbc3d: Rayleigh number (CARAML: RBC2D 1e7, RBC3D 1e5)", positive, k::positive));
  add(key("rbc_prandtl", &D::rbc_prandtl, "rbc2d, rbc3d: Prandtl number", positive, k::positive));
  add(key("rbc_aspect", &D::rbc_aspect, "rbc2d, rbc3d: domain width (x, and y in 3-D) over height",
          positive, k::positive));
  add(key("rbc_dt", &D::rbc_dt,
          "rbc2d, rbc3d: solver time step in free-fall times (fixed; generation fails if the CFL "
          "number "
          "passes rbc_cfl_max)",
          positive, k::positive));
  add(key("rbc_spinup_time", &D::rbc_spinup_time,
          "rbc2d, rbc3d: free-fall times simulated before the first stored state", "a number >= 0",
          k::non_negative));
  add(
      key(
          "rbc_states", &D::rbc_states, "rbc2d, rbc3d: stored states per trajectory",
          "an integer >= 2", +[](const int& v) { return v >= 2; }),
      {"problem", "t_in", "t_out"}, +[](const D& d) {
        return (d.problem != "rbc2d" && d.problem != "rbc3d") || d.rbc_states >= d.t_in + d.t_out
                   ? std::string()
                   : fmt::format("at least t_in + t_out = {} (an example spans that many states)",
                                 d.t_in + d.t_out);
      });
  add(key("rbc_record_steps", &D::rbc_record_steps,
          "rbc2d, rbc3d: solver steps between stored states (1: the model learns the solver's time "
          "step)",
          count, k::at_least_1));
  add(key("rbc_noise_amplitude", &D::rbc_noise_amplitude,
          "rbc2d, rbc3d: amplitude of the initial buoyancy perturbation", positive, k::positive));
  add(key("rbc_cfl_max", &D::rbc_cfl_max, "rbc2d, rbc3d: the largest CFL number accepted", positive,
          k::positive));
}

}  // namespace scaffold::config
