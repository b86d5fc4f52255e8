// The PDE data configuration of the FNO workload (`scaffold generate_pde_data`). Its first keys
// are the FNO benchmark's own (problem, data_dir, seed, grid, train_samples, val_samples, t_in,
// t_out, viscosity: same names, same meaning), so one config file serves both commands; the rest
// are the generators' (prefixed burgers_, ns_, rbc_), with the FNO paper's (Burgers, Navier-
// Stokes) and CARAML's RBC2D (Rayleigh-Benard) defaults. Built only by config/load; immutable
// afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scaffold::config {

struct FnoDataConfig {
  // Shared with the FNO benchmark.
  std::string problem = "rbc2d";      // burgers1d | navier_stokes2d | rbc2d | rbc3d
  std::string data_dir = "fno_data";  // cache of the generated PDE datasets
  int64_t seed = 42;
  std::vector<int> grid{
      256, 64};  // burgers1d [N]; navier_stokes2d [N, N]; rbc2d [nx, nz]; rbc3d [nx, ny, nz]
  int train_samples = 1000;  // training examples
  int val_samples = 100;     // validation examples
  int t_in = 1;              // input time steps per example (burgers1d: 1)
  int t_out = 1;             // predicted time steps per example
  double viscosity = 0.0;    // 0: the problem's default (burgers1d 0.1, navier_stokes2d 1e-3)

  // burgers1d: u(., 0) -> u(., j T / t_out), j = 1 .. t_out.
  int burgers_solver_refinement =
      8;  // the solver's grid over the stored one (the paper: 8192 / 1024)
  double burgers_final_time = 1.0;
  double burgers_dt = 1e-3;
  double burgers_grf_scale = 625.0;  // initial GRF: covariance scale (-Laplacian + tau^2)^-alpha
  double burgers_grf_tau = 5.0;
  double burgers_grf_alpha = 2.0;

  // navier_stokes2d: t_in records -> the next t_out, ns_record_interval apart.
  int ns_solver_refinement = 1;
  double ns_forcing_amplitude = 0.1;
  double ns_record_interval = 1.0;
  double ns_dt = 1e-2;
  double ns_grf_scale = 343.0;
  double ns_grf_tau = 7.0;
  double ns_grf_alpha = 2.5;

  // rbc2d, rbc3d: trajectories of rbc_states stored states; t_in states -> the next t_out.
  double rbc_rayleigh = 1e7;
  double rbc_prandtl = 1.0;
  double rbc_aspect = 4.0;
  double rbc_dt = 5e-3;
  double rbc_spinup_time = 50.0;
  int rbc_states = 201;
  int rbc_record_steps = 1;
  double rbc_noise_amplitude = 1e-3;
  double rbc_cfl_max = 0.8;
};

}  // namespace scaffold::config
