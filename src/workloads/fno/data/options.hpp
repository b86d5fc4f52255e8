// What decides a PDE dataset of the FNO workload: the problem (Burgers, 2-D Navier-Stokes,
// Rayleigh-Benard), its grid, solver and physics parameters, the sample counts and the seed.
// Plain structs with the FNO paper's / CARAML's defaults; config/ fills them from YAML and flags
// (fno_data_config.hpp), nothing here knows either. Torch-free, so the cache key and the folder
// layout build and test without LibTorch. Units: lengths in domain units, times in the problem's
// time unit (Burgers/Navier-Stokes: the FNO paper's; Rayleigh-Benard: free-fall times).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::fno {

enum class FnoProblem { Burgers, NavierStokes, RayleighBenard, RayleighBenard3d };
enum class FnoSplit { Train, Val };

// "burgers1d", "navier_stokes2d", "rbc2d", "rbc3d" (the FNO benchmark's names; CARAML's tags are
// RBC2D and RBC3D).
const char* problem_name(FnoProblem problem);
// Throws core::Error naming the value and the choices when `name` is none of them.
FnoProblem parse_problem(const std::string& name);
// rbc2d or rbc3d: trajectories of stored states.
inline bool is_rayleigh_benard(FnoProblem p) {
  return p == FnoProblem::RayleighBenard || p == FnoProblem::RayleighBenard3d;
}

// A periodic Gaussian random field on the unit interval or torus with covariance
// scale * (-Laplacian + tau^2 I)^(-alpha), mean zero (the constant mode is not drawn).
struct GrfOptions {
  double scale = 625.0;
  double tau = 5.0;
  double alpha = 2.0;
};

// u_t + (u^2/2)_x = viscosity u_xx on [0, 1) periodic; u(., 0) a GRF, target u(., t_j) at
// t_j = j final_time / steps_out, j = 1 .. steps_out. The FNO paper: nu 0.1, GRF
// 625(-Delta + 25 I)^-2, solved on 8192 points and subsampled, one target at t = 1.
struct BurgersOptions {
  int64_t grid = 1024;         // points of the stored fields
  int64_t solver_grid = 8192;  // points the solver uses (a multiple of grid; pointwise subsampled)
  double viscosity = 0.1;
  double final_time = 1.0;
  double dt = 1e-3;       // ETDRK4 step; final_time / (steps_out dt) must be an integer
  int64_t steps_out = 1;  // target snapshots
  GrfOptions grf{625.0, 5.0, 2.0};
  int64_t train_samples = 1000;  // the FNO paper: 1000 training, 100 test pairs
  int64_t val_samples = 100;
};

// Vorticity w on the unit torus: w_t + u.grad w = viscosity Lap w + f, div u = 0,
// f = forcing_amplitude (sin 2pi(x+y) + cos 2pi(x+y)). Records at t = k * record_interval,
// k = 1 .. steps_in + steps_out: the first steps_in are the input, the rest the target (the FNO
// paper: nu 1e-3, 10 -> 40, T = 50; solved on 256^2 with dt 1e-4 and subsampled to 64^2).
struct NavierStokesOptions {
  int64_t grid = 64;         // stored side
  int64_t solver_grid = 64;  // solver side (a multiple of grid; pointwise subsampled)
  double viscosity = 1e-3;
  double forcing_amplitude = 0.1;
  int64_t steps_in = 10;
  int64_t steps_out = 40;
  double record_interval = 1.0;  // time between records
  double dt = 1e-2;              // ETDRK4 step; record_interval / dt must be an integer
  // The paper writes N(0, 7^{3/2} (-Delta + 49 I)^-2.5); 7^{3/2} is the code's sigma
  // (random_fields.py: sigma = tau^(alpha - d/2)), a scale of the square-root eigenvalues, so the
  // covariance is sigma^2 = 343 (the 2020 version of that code drew real normals and got 2 sigma^2
  // = 686).
  GrfOptions grf{343.0, 7.0, 2.5};
  int64_t train_samples = 1000;  // the FNO paper: 1000 training, 200 test
  int64_t val_samples = 200;
};

// Boussinesq convection in free-fall units on [0, aspect) x [0, 1] (rbc2d) or [0, aspect)^2 x
// [0, 1] (rbc3d), periodic horizontally, no-slip walls, buoyancy 1 at the bottom and 0 at the
// top: nu = sqrt(Pr/Ra), kappa = 1/sqrt(Ra Pr). A sample is one trajectory from a random
// perturbation of the conductive state: spinup_time unrecorded, then `states` stored states
// record_steps solver steps apart. An example maps consecutive stored states (u_x, u_z, b, p;
// in 3-D u_x, u_y, u_z, b, p) to the following ones (sources.hpp).
struct RayleighBenardOptions {
  int64_t nx = 256;  // Fourier points in x (CARAML's RBC2D: 256 x 64; RBC3D: 64 x 64 x 32)
  int64_t ny = 0;    // Fourier points in y (rbc3d only; 0 for rbc2d)
  int64_t nz = 64;   // Chebyshev-Gauss-Lobatto points in z, walls included
  double rayleigh = 1e7;
  double prandtl = 1.0;
  double aspect = 4.0;        // domain width / height
  double dt = 5e-3;           // IMEX step (fixed; the run fails if the CFL number passes cfl_max)
  double spinup_time = 50.0;  // simulated before the first stored state
  int64_t states = 201;       // stored states per trajectory (states - 1 examples)
  int64_t record_steps = 1;   // solver steps between stored states
  double noise_amplitude = 1e-3;  // initial buoyancy perturbation
  double cfl_max = 0.8;
  int64_t train_samples = 5;  // trajectories (5 x 200 = 1000 examples)
  int64_t val_samples = 1;
};

struct FnoDataOptions {
  FnoProblem problem = FnoProblem::RayleighBenard;
  uint64_t seed = 42;
  std::filesystem::path dataset_dir = "fno_data";  // cache root
  BurgersOptions burgers;
  NavierStokesOptions navier_stokes;
  RayleighBenardOptions rayleigh_benard;
  // How the work runs; never part of the cache key (results do not depend on them).
  int threads = 1;          // generation threads per rank (one sample each, single-threaded)
  std::string code_commit;  // recorded in meta.json
};

// "train", "val": also the folder names of the splits.
const char* split_name(FnoSplit split);

// Checks the options of the chosen problem (grids, divisibility of times by dt, counts);
// throws core::Error naming the field, the value and what is expected.
void validate(const FnoDataOptions& options);

}  // namespace scaffold::fno
