// Internal to config/: the FNO data keys as schema entries of any struct C that holds a
// FnoDataConfig (FnoDataConfig itself for `scaffold generate_pde_data`; the FNO benchmark's struct
// through a member), so both read the same keys with the same help, ranges and cross-checks.
// `data` returns the FnoDataConfig inside a C; keys named in `skip` are left to C (e.g. a seed
// the benchmark struct already has).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/fno_data_options.hpp"
#include "config/schema_rules.hpp"

namespace scaffold::config {

template <class C>
using FnoDataAccess = FnoDataConfig& (*)(C&);

namespace fno_keys {

// Like rules::bind_key, through `data`.
template <class C, typename T>
KeySpecT<C> bind(FnoDataAccess<C> data, const char* name, T FnoDataConfig::*member, const char* help,
                 std::string allowed, bool (*ok)(const T&) = nullptr) {
  KeySpecT<C> spec;
  spec.name = name;
  spec.kind = rules::kind_of<T>();
  spec.help = help;
  spec.allowed = std::move(allowed);
  spec.assign = [data, member](const KeySpecT<C>& s, C& c, const RawValue& v) {
    return rules::store(s, data(c).*member, v);
  };
  spec.format = [data, member](const KeySpecT<C>& s, const C& c) {
    return rules::format_value(s, data(const_cast<C&>(c)).*member);
  };
  spec.check = [data, member, ok, text = spec.allowed](const C& c) {
    return ok == nullptr || ok(data(const_cast<C&>(c)).*member) ? std::string() : text;
  };
  if constexpr (std::is_same_v<T, std::string>)
    spec.path = [data, member](C& c) -> std::string& { return data(c).*member; };
  return spec;
}

inline bool positive(const double& v) { return v > 0.0; }
inline bool non_negative(const double& v) { return v >= 0.0; }
inline bool even_grid(const int& v) { return v >= 4 && v % 2 == 0 && v <= (1 << 20); }
inline bool grid_2d(const int& v) { return v >= 4 && v % 2 == 0 && v <= 8192; }
inline bool rbc_x(const int& v) { return v >= 8 && v % 2 == 0 && v <= 8192; }
inline bool rbc_z(const int& v) { return v >= 8 && v <= 1024; }
inline bool count(const int& v) { return v >= 1; }
inline bool seed(const int64_t& v) { return v >= 0; }

// "" when `interval` is a positive whole number of `dt` steps, else what is expected.
inline std::string multiple_of(double interval, double dt, const char* dt_key) {
  const double ratio = interval / dt;
  if (std::round(ratio) >= 1.0 && std::abs(ratio - std::round(ratio)) <= 1e-9 * std::max(1.0, ratio)) return "";
  return fmt::format("a whole number (>= 1) of {} = {} steps; {} / {} = {}", dt_key, dt, interval, dt, ratio);
}

}  // namespace fno_keys

template <class C>
void append_fno_data_keys(std::vector<KeySpecT<C>>& t, FnoDataAccess<C> data, const std::vector<std::string>& skip = {}) {
  using D = FnoDataConfig;
  using fno_keys::bind;
  auto add = [&](KeySpecT<C> spec) -> KeySpecT<C>* {
    for (const auto& name : skip)
      if (name == spec.name) return nullptr;
    t.push_back(std::move(spec));
    return &t.back();
  };
  auto cross = [&](KeySpecT<C>* spec, std::vector<std::string> deps, std::string (*check)(const D&)) {
    if (spec == nullptr) return;
    spec->depends_on = std::move(deps);
    spec->cross_check = [data, check](const C& c) { return check(data(const_cast<C&>(c))); };
  };
  const char* grid_allowed = "an even integer in [4, 1048576]";
  const char* positive = "a number > 0";
  const char* count = "an integer >= 1";

  if (auto* s = add(bind<C>(data, "problem", &D::problem,
                            "the PDE: burgers (1-D viscous Burgers, u0 -> u(T)), navier_stokes (2-D vorticity on the "
                            "torus, first records -> the next), rayleigh_benard (2-D convection, state -> next state)",
                            "one of burgers, navier_stokes, rayleigh_benard")))
    s->choices = {"burgers", "navier_stokes", "rayleigh_benard"};
  if (auto* s = add(bind<C>(data, "dataset_dir", &D::dataset_dir, "cache root of the generated PDE datasets",
                            "a non-empty path", rules::non_empty)))
    s->absolute_path = true;
  add(bind<C>(data, "seed", &D::seed, "seed of the initial conditions", "an integer >= 0", fno_keys::seed));

  add(bind<C>(data, "burgers_grid", &D::burgers_grid, "Burgers: points of the stored fields", grid_allowed,
              fno_keys::even_grid));
  cross(add(bind<C>(data, "burgers_solver_grid", &D::burgers_solver_grid,
                    "Burgers: points the solver uses; the stored fields take every (solver_grid / grid)-th point",
                    grid_allowed, fno_keys::even_grid)),
        {"burgers_grid"}, +[](const D& d) {
          return d.burgers_solver_grid % d.burgers_grid == 0
                     ? std::string()
                     : fmt::format("a multiple of burgers_grid = {}", d.burgers_grid);
        });
  add(bind<C>(data, "burgers_viscosity", &D::burgers_viscosity, "Burgers: viscosity nu", positive, fno_keys::positive));
  add(bind<C>(data, "burgers_final_time", &D::burgers_final_time, "Burgers: time of the target u(., T)", positive,
              fno_keys::positive));
  cross(add(bind<C>(data, "burgers_dt", &D::burgers_dt, "Burgers: ETDRK4 time step", positive, fno_keys::positive)),
        {"burgers_final_time"},
        +[](const D& d) { return fno_keys::multiple_of(d.burgers_final_time, d.burgers_dt, "burgers_dt"); });
  add(bind<C>(data, "burgers_grf_scale", &D::burgers_grf_scale,
              "Burgers: initial condition GRF, covariance scale * (-Laplacian + tau^2)^-alpha", positive,
              fno_keys::positive));
  add(bind<C>(data, "burgers_grf_tau", &D::burgers_grf_tau, "Burgers: GRF tau", positive, fno_keys::positive));
  add(bind<C>(data, "burgers_grf_alpha", &D::burgers_grf_alpha, "Burgers: GRF alpha", positive, fno_keys::positive));
  add(bind<C>(data, "burgers_train_samples", &D::burgers_train_samples, "Burgers: training pairs", count,
              fno_keys::count));
  add(bind<C>(data, "burgers_val_samples", &D::burgers_val_samples, "Burgers: validation pairs", count,
              fno_keys::count));

  add(bind<C>(data, "ns_grid", &D::ns_grid, "Navier-Stokes: side of the stored fields",
              "an even integer in [4, 8192]", fno_keys::grid_2d));
  cross(add(bind<C>(data, "ns_solver_grid", &D::ns_solver_grid,
                    "Navier-Stokes: side the solver uses; stored fields are subsampled from it",
                    "an even integer in [4, 8192]", fno_keys::grid_2d)),
        {"ns_grid"}, +[](const D& d) {
          return d.ns_solver_grid % d.ns_grid == 0 ? std::string()
                                                   : fmt::format("a multiple of ns_grid = {}", d.ns_grid);
        });
  add(bind<C>(data, "ns_viscosity", &D::ns_viscosity, "Navier-Stokes: viscosity nu (the FNO paper: 1e-3, 1e-4, 1e-5)",
              positive, fno_keys::positive));
  add(bind<C>(data, "ns_forcing_amplitude", &D::ns_forcing_amplitude,
              "Navier-Stokes: a in the forcing a (sin 2pi(x+y) + cos 2pi(x+y)); 0: unforced", "a number >= 0",
              fno_keys::non_negative));
  add(bind<C>(data, "ns_steps_in", &D::ns_steps_in, "Navier-Stokes: records in the input (the FNO paper: 10)", count,
              fno_keys::count));
  add(bind<C>(data, "ns_steps_out", &D::ns_steps_out,
              "Navier-Stokes: records in the target (the FNO paper: 40 for nu 1e-3)", count, fno_keys::count));
  add(bind<C>(data, "ns_record_interval", &D::ns_record_interval, "Navier-Stokes: time between records", positive,
              fno_keys::positive));
  cross(add(bind<C>(data, "ns_dt", &D::ns_dt, "Navier-Stokes: ETDRK4 time step", positive, fno_keys::positive)),
        {"ns_record_interval"},
        +[](const D& d) { return fno_keys::multiple_of(d.ns_record_interval, d.ns_dt, "ns_dt"); });
  add(bind<C>(data, "ns_grf_scale", &D::ns_grf_scale,
              "Navier-Stokes: initial vorticity GRF, covariance scale * (-Laplacian + tau^2)^-alpha", positive,
              fno_keys::positive));
  add(bind<C>(data, "ns_grf_tau", &D::ns_grf_tau, "Navier-Stokes: GRF tau", positive, fno_keys::positive));
  add(bind<C>(data, "ns_grf_alpha", &D::ns_grf_alpha, "Navier-Stokes: GRF alpha", positive, fno_keys::positive));
  add(bind<C>(data, "ns_train_samples", &D::ns_train_samples, "Navier-Stokes: training samples", count,
              fno_keys::count));
  add(bind<C>(data, "ns_val_samples", &D::ns_val_samples, "Navier-Stokes: validation samples", count,
              fno_keys::count));

  add(bind<C>(data, "rbc_nx", &D::rbc_nx, "Rayleigh-Benard: Fourier points in x (CARAML: 256)",
              "an even integer in [8, 8192]", fno_keys::rbc_x));
  add(bind<C>(data, "rbc_nz", &D::rbc_nz, "Rayleigh-Benard: Chebyshev points in z, walls included (CARAML: 64)",
              "an integer in [8, 1024]", fno_keys::rbc_z));
  add(bind<C>(data, "rbc_rayleigh", &D::rbc_rayleigh, "Rayleigh-Benard: Rayleigh number (CARAML: 1e7)", positive,
              fno_keys::positive));
  add(bind<C>(data, "rbc_prandtl", &D::rbc_prandtl, "Rayleigh-Benard: Prandtl number", positive, fno_keys::positive));
  add(bind<C>(data, "rbc_aspect", &D::rbc_aspect, "Rayleigh-Benard: domain width / height", positive,
              fno_keys::positive));
  add(bind<C>(data, "rbc_dt", &D::rbc_dt,
              "Rayleigh-Benard: solver time step in free-fall times (fixed; the run fails if the CFL number exceeds "
              "rbc_cfl_max)",
              positive, fno_keys::positive));
  add(bind<C>(data, "rbc_spinup_time", &D::rbc_spinup_time,
              "Rayleigh-Benard: free-fall times simulated before the first stored state", "a number >= 0",
              fno_keys::non_negative));
  add(bind<C>(data, "rbc_states", &D::rbc_states,
              "Rayleigh-Benard: stored states per trajectory (states - 1 examples)", "an integer >= 2",
              +[](const int& v) { return v >= 2; }));
  add(bind<C>(data, "rbc_record_steps", &D::rbc_record_steps,
              "Rayleigh-Benard: solver steps between stored states (1: the model learns the solver's step)", count,
              fno_keys::count));
  add(bind<C>(data, "rbc_noise_amplitude", &D::rbc_noise_amplitude,
              "Rayleigh-Benard: amplitude of the initial buoyancy perturbation", positive, fno_keys::positive));
  add(bind<C>(data, "rbc_cfl_max", &D::rbc_cfl_max, "Rayleigh-Benard: largest CFL number accepted", positive,
              fno_keys::positive));
  add(bind<C>(data, "rbc_train_samples", &D::rbc_train_samples, "Rayleigh-Benard: training trajectories", count,
              fno_keys::count));
  add(bind<C>(data, "rbc_val_samples", &D::rbc_val_samples, "Rayleigh-Benard: validation trajectories", count,
              fno_keys::count));
}

}  // namespace scaffold::config
