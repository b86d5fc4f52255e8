// Key-by-key copy, the problem's defaults for viscosity 0, and the trajectory count of rbc2d/3d;
// the config has already checked every range, fno::validate checks the result again.
#include "workloads/fno/data/config_options.hpp"

namespace scaffold::fno {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

FnoDataOptions fno_data_options(const config::FnoDataConfig& c, int threads,
                                const std::string& code_commit) {
  FnoDataOptions o;
  o.problem = parse_problem(c.problem);
  o.seed = static_cast<uint64_t>(c.seed);
  o.dataset_dir = c.data_dir;
  o.threads = threads;
  o.code_commit = code_commit;
  const int64_t g0 = c.grid.empty() ? 0 : c.grid[0], g1 = c.grid.size() > 1 ? c.grid[1] : 0;

  auto& b = o.burgers;
  b.grid = g0;
  b.solver_grid = g0 * c.burgers_solver_refinement;
  b.viscosity = c.viscosity > 0.0 ? c.viscosity : 0.1;
  b.final_time = c.burgers_final_time;
  b.dt = c.burgers_dt;
  b.steps_out = c.t_out;
  b.grf = {c.burgers_grf_scale, c.burgers_grf_tau, c.burgers_grf_alpha};
  b.train_samples = c.train_samples;
  b.val_samples = c.val_samples;

  auto& n = o.navier_stokes;
  n.grid = g0;
  n.solver_grid = g0 * c.ns_solver_refinement;
  n.viscosity = c.viscosity > 0.0 ? c.viscosity : 1e-3;
  n.forcing_amplitude = c.ns_forcing_amplitude;
  n.steps_in = c.t_in;
  n.steps_out = c.t_out;
  n.record_interval = c.ns_record_interval;
  n.dt = c.ns_dt;
  n.grf = {c.ns_grf_scale, c.ns_grf_tau, c.ns_grf_alpha};
  n.train_samples = c.train_samples;
  n.val_samples = c.val_samples;

  auto& r = o.rayleigh_benard;
  r.nx = g0;
  if (o.problem == FnoProblem::RayleighBenard3d) {  // [nx, ny, nz]
    r.ny = g1;
    r.nz = c.grid.size() > 2 ? c.grid[2] : 0;
  } else {
    r.nz = g1;
  }
  r.rayleigh = c.rbc_rayleigh;
  r.prandtl = c.rbc_prandtl;
  r.aspect = c.rbc_aspect;
  r.dt = c.rbc_dt;
  r.spinup_time = c.rbc_spinup_time;
  r.states = c.rbc_states;
  r.record_steps = c.rbc_record_steps;
  r.noise_amplitude = c.rbc_noise_amplitude;
  r.cfl_max = c.rbc_cfl_max;
  const int64_t per_trajectory = std::max<int64_t>(1, c.rbc_states - c.t_in - c.t_out + 1);
  r.train_samples = ceil_div(c.train_samples, per_trajectory);
  r.val_samples = ceil_div(c.val_samples, per_trajectory);
  return o;
}

FnoSourceOptions fno_source_options(const config::FnoDataConfig& c) {
  FnoSourceOptions s;
  s.train_examples = c.train_samples;
  s.val_examples = c.val_samples;
  if (is_rayleigh_benard(parse_problem(c.problem))) {
    s.rbc_steps_in = c.t_in;
    s.rbc_steps_out = c.t_out;
  }
  return s;
}

}  // namespace scaffold::fno
