#include "workloads/fno/sources.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "workloads/fno/heat_source.hpp"

namespace scaffold::fno {

ProblemShape problem_shape(const config::FnoConfig& cfg) {
  ProblemShape s;
  if (cfg.problem == "heat") {
    s = {1, cfg.t_out, cfg.t_out};
  } else if (cfg.problem == "navier_stokes2d") {
    s = {cfg.t_in, cfg.t_out, cfg.t_out};  // the paper's 2-D setting: T_in steps in, T_out out
  } else if (cfg.problem == "rbc2d") {
    s = {4 * cfg.t_in, 4 * cfg.t_out, cfg.t_out};  // velocity (2), buoyancy, pressure per step
  } else {
    s = {cfg.t_in, cfg.t_out, cfg.t_out};  // burgers1d: u(x, 0) -> u(x, 1)
  }
  return s;
}

FnoData make_fno_data(const config::FnoConfig& cfg) {
  FnoData d;
  d.problem = cfg.problem;
  for (int n : cfg.grid) d.grid.push_back(n);
  d.shape = problem_shape(cfg);
  if (cfg.problem == "heat") {
    HeatOperatorOptions o;
    o.grid = d.grid;
    o.t_out = cfg.t_out;
    o.diffusivity = cfg.viscosity > 0 ? cfg.viscosity : 0.002;
    o.seed = static_cast<uint64_t>(cfg.seed);
    o.count = cfg.train_samples;
    o.offset = 0;
    d.train = std::make_unique<HeatOperatorSource>(o);
    o.count = cfg.val_samples;
    o.offset = cfg.train_samples;  // disjoint from the training examples
    d.val = std::make_unique<HeatOperatorSource>(o);
    d.viscosity = o.diffusivity;
    return d;
  }
  throw core::Error(fmt::format("problem: '{}' needs the FNO data generators, which this build does not have yet; "
                                "use problem: heat",
                                cfg.problem));
}

}  // namespace scaffold::fno
