// The PDE data configuration of the FNO workload (`scaffold generate_pde_data`, and the data keys
// of the FNO benchmark's config): the problem, the cache root, the seed and, per problem, its
// grid, solver, physics and sample counts, with the FNO paper's (Burgers, Navier-Stokes) and
// CARAML's RBC2D (Rayleigh-Benard) defaults. Per-problem keys carry a prefix (burgers_, ns_,
// rbc_) because a Burgers sample is a pair while a Rayleigh-Benard sample is a trajectory, and
// their sensible sizes differ by orders of magnitude. Built only by config/load; immutable after.
#pragma once

#include <cstdint>
#include <string>

namespace scaffold::config {

struct FnoDataConfig {
  std::string problem = "rayleigh_benard";  // burgers | navier_stokes | rayleigh_benard
  std::string dataset_dir = "pde_datasets";  // cache root
  int64_t seed = 42;

  // 1-D viscous Burgers (the FNO paper's first benchmark): u(., 0) -> u(., final_time).
  int burgers_grid = 1024;
  int burgers_solver_grid = 8192;
  double burgers_viscosity = 0.1;
  double burgers_final_time = 1.0;
  double burgers_dt = 1e-3;
  double burgers_grf_scale = 625.0;  // covariance scale (-Delta + tau^2)^-alpha
  double burgers_grf_tau = 5.0;
  double burgers_grf_alpha = 2.0;
  int burgers_train_samples = 1000;
  int burgers_val_samples = 100;

  // 2-D Navier-Stokes, vorticity on the unit torus: the first ns_steps_in records -> the next
  // ns_steps_out.
  int ns_grid = 64;
  int ns_solver_grid = 64;
  double ns_viscosity = 1e-3;
  double ns_forcing_amplitude = 0.1;
  int ns_steps_in = 10;
  int ns_steps_out = 40;
  double ns_record_interval = 1.0;
  double ns_dt = 1e-2;
  double ns_grf_scale = 343.0;
  double ns_grf_tau = 7.0;
  double ns_grf_alpha = 2.5;
  int ns_train_samples = 1000;
  int ns_val_samples = 200;

  // 2-D Rayleigh-Benard (CARAML's RBC2D): one stored state -> the next.
  int rbc_nx = 256;
  int rbc_nz = 64;
  double rbc_rayleigh = 1e7;
  double rbc_prandtl = 1.0;
  double rbc_aspect = 4.0;
  double rbc_dt = 5e-3;
  double rbc_spinup_time = 50.0;
  int rbc_states = 201;
  int rbc_record_steps = 1;
  double rbc_noise_amplitude = 1e-3;
  double rbc_cfl_max = 0.8;
  int rbc_train_samples = 4;
  int rbc_val_samples = 1;
};

}  // namespace scaffold::config
