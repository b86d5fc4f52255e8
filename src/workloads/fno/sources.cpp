#include "workloads/fno/sources.hpp"

#include <cmath>

#include "core/version.hpp"
#include "workloads/fno/data/config_options.hpp"
#include "workloads/fno/data/generate.hpp"
#include "workloads/fno/data/sources.hpp"
#include "workloads/fno/target.hpp"

namespace scaffold::fno {

ProblemShape problem_shape(const config::FnoConfig& cfg) {
  ProblemShape s;
  if (cfg.problem == "navier_stokes2d") {
    s = {cfg.t_in, cfg.t_out, cfg.t_out, 1};  // the paper's 2-D setting: T_in steps in, T_out out
  } else if (cfg.problem == "rbc2d") {
    s = {4 * cfg.t_in, 4 * cfg.t_out, cfg.t_out, 4};  // velocity (2), buoyancy, pressure per step
  } else if (cfg.problem == "rbc3d") {
    s = {5 * cfg.t_in, 5 * cfg.t_out, cfg.t_out, 5};  // velocity (3), buoyancy, pressure per step
  } else {
    s = {cfg.t_in, cfg.t_out, cfg.t_out, 1};  // burgers1d: u(x, 0) -> u(x, t_j)
  }
  return s;
}

FnoData make_fno_data(const config::FnoConfig& cfg, dist::Communicator& comm, int threads) {
  const config::FnoDataConfig data_cfg = config::fno_data_config(cfg);
  const FnoDataOptions options = fno_data_options(data_cfg, threads, core::git_commit());
  const FnoDatasetInfo info = ensure_fno_dataset(comm, options);  // collective; agreed errors
  FnoData d;
  dist::run_agreed(comm, [&] {
    FnoSources s = open_fno_sources(info.root, fno_source_options(data_cfg));
    d.train = std::move(s.train);
    d.val = std::move(s.val);
    d.grid = s.grid;
  });
  d.problem = cfg.problem;
  d.shape = problem_shape(cfg);
  if (cfg.target == "update") {
    // operator_learning's outType update: the target is (next - current) x target_scaling.
    d.train = std::make_unique<UpdateTargetSource>(std::move(d.train), d.shape.step_channels,
                                                   cfg.target_scaling);
    d.val = std::make_unique<UpdateTargetSource>(std::move(d.val), d.shape.step_channels,
                                                 cfg.target_scaling);
  }
  d.root = info.root;
  d.reused = info.reused;
  d.samples_generated = info.samples_generated;
  d.solver_steps = info.solver_steps;
  d.generate_s = info.seconds;
  if (cfg.problem == "burgers1d")
    d.viscosity = options.burgers.viscosity;
  else if (cfg.problem == "navier_stokes2d")
    d.viscosity = options.navier_stokes.viscosity;
  else
    d.viscosity = std::sqrt(options.rayleigh_benard.prandtl / options.rayleigh_benard.rayleigh);
  return d;
}

}  // namespace scaffold::fno
