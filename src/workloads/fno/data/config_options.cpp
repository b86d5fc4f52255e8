// Key-by-key copy; the config has already checked every range, fno::validate checks again.
#include "workloads/fno/data/config_options.hpp"

namespace scaffold::fno {

FnoDataOptions fno_data_options(const config::FnoDataConfig& c, int threads, const std::string& code_commit) {
  FnoDataOptions o;
  o.problem = parse_problem(c.problem);
  o.seed = static_cast<uint64_t>(c.seed);
  o.dataset_dir = c.dataset_dir;
  o.threads = threads;
  o.code_commit = code_commit;

  auto& b = o.burgers;
  b.grid = c.burgers_grid;
  b.solver_grid = c.burgers_solver_grid;
  b.viscosity = c.burgers_viscosity;
  b.final_time = c.burgers_final_time;
  b.dt = c.burgers_dt;
  b.grf = {c.burgers_grf_scale, c.burgers_grf_tau, c.burgers_grf_alpha};
  b.train_samples = c.burgers_train_samples;
  b.val_samples = c.burgers_val_samples;

  auto& n = o.navier_stokes;
  n.grid = c.ns_grid;
  n.solver_grid = c.ns_solver_grid;
  n.viscosity = c.ns_viscosity;
  n.forcing_amplitude = c.ns_forcing_amplitude;
  n.steps_in = c.ns_steps_in;
  n.steps_out = c.ns_steps_out;
  n.record_interval = c.ns_record_interval;
  n.dt = c.ns_dt;
  n.grf = {c.ns_grf_scale, c.ns_grf_tau, c.ns_grf_alpha};
  n.train_samples = c.ns_train_samples;
  n.val_samples = c.ns_val_samples;

  auto& r = o.rayleigh_benard;
  r.nx = c.rbc_nx;
  r.nz = c.rbc_nz;
  r.rayleigh = c.rbc_rayleigh;
  r.prandtl = c.rbc_prandtl;
  r.aspect = c.rbc_aspect;
  r.dt = c.rbc_dt;
  r.spinup_time = c.rbc_spinup_time;
  r.states = c.rbc_states;
  r.record_steps = c.rbc_record_steps;
  r.noise_amplitude = c.rbc_noise_amplitude;
  r.cfl_max = c.rbc_cfl_max;
  r.train_samples = c.rbc_train_samples;
  r.val_samples = c.rbc_val_samples;
  return o;
}

}  // namespace scaffold::fno
