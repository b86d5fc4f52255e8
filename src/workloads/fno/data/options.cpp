// Problem names and the validation of FnoDataOptions: every check names the field, the value
// and what is expected, so a bad config fails before any work starts.
#include "workloads/fno/data/options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"

namespace scaffold::fno {
namespace {

// An integer number of steps of `dt` in `interval` (within 1e-9 relative), else an error.
void check_multiple(const std::string& interval_name, double interval, const std::string& dt_name,
                    double dt) {
  if (!(dt > 0.0)) throw core::Error(fmt::format("{} = {}: expected a number > 0", dt_name, dt));
  const double ratio = interval / dt;
  if (std::abs(ratio - std::round(ratio)) > 1e-9 * std::max(1.0, ratio) || std::round(ratio) < 1.0)
    throw core::Error(
        fmt::format("{} = {} must be a positive integer multiple of {} = {} (ratio {})",
                    interval_name, interval, dt_name, dt, ratio));
}

void check_grid(const std::string& name, int64_t grid, int64_t solver_grid,
                const std::string& solver_name) {
  if (grid < 4 || grid % 2 != 0)
    throw core::Error(fmt::format("{} = {}: expected an even integer >= 4", name, grid));
  if (solver_grid < grid || solver_grid % grid != 0)
    throw core::Error(fmt::format(
        "{} = {}: expected a multiple of {} = {} (the stored grid is subsampled from it)",
        solver_name, solver_grid, name, grid));
}

void check_counts(int64_t train, int64_t val) {
  if (train < 1)
    throw core::Error(fmt::format("train_samples = {}: expected an integer >= 1", train));
  if (val < 1) throw core::Error(fmt::format("val_samples = {}: expected an integer >= 1", val));
}

void check_grf(const std::string& prefix, const GrfOptions& g) {
  if (!(g.scale > 0.0) || !(g.tau > 0.0) || !(g.alpha > 0.0))
    throw core::Error(fmt::format("{}grf_scale/tau/alpha = {}/{}/{}: expected numbers > 0", prefix,
                                  g.scale, g.tau, g.alpha));
}

}  // namespace

const char* problem_name(FnoProblem problem) {
  switch (problem) {
    case FnoProblem::Burgers:
      return "burgers1d";
    case FnoProblem::NavierStokes:
      return "navier_stokes2d";
    case FnoProblem::RayleighBenard:
      return "rbc2d";
    case FnoProblem::RayleighBenard3d:
      return "rbc3d";
  }
  return "?";
}

const char* split_name(FnoSplit split) {
  return split == FnoSplit::Train ? "train" : "val";
}

FnoProblem parse_problem(const std::string& name) {
  for (FnoProblem p : {FnoProblem::Burgers, FnoProblem::NavierStokes, FnoProblem::RayleighBenard,
                       FnoProblem::RayleighBenard3d})
    if (name == problem_name(p)) return p;
  throw core::Error(
      fmt::format("problem '{}': expected one of burgers1d, navier_stokes2d, rbc2d, rbc3d", name));
}

void validate(const FnoDataOptions& o) {
  if (o.threads < 1)
    throw core::Error(fmt::format("threads = {}: expected an integer >= 1", o.threads));
  if (o.dataset_dir.empty()) throw core::Error("dataset_dir: expected a non-empty path");
  switch (o.problem) {
    case FnoProblem::Burgers: {
      const auto& b = o.burgers;
      check_grid("grid", b.grid, b.solver_grid,
                 "the solver grid (burgers_solver_refinement x grid)");
      if (!(b.viscosity > 0.0))
        throw core::Error(fmt::format("viscosity = {}: expected a number > 0", b.viscosity));
      if (b.steps_out < 1)
        throw core::Error(fmt::format("t_out = {}: expected an integer >= 1", b.steps_out));
      check_multiple("burgers_final_time / t_out", b.final_time / static_cast<double>(b.steps_out),
                     "burgers_dt", b.dt);
      check_grf("burgers_", b.grf);
      check_counts(b.train_samples, b.val_samples);
      break;
    }
    case FnoProblem::NavierStokes: {
      const auto& n = o.navier_stokes;
      check_grid("grid", n.grid, n.solver_grid, "the solver grid (ns_solver_refinement x grid)");
      if (!(n.viscosity > 0.0))
        throw core::Error(fmt::format("viscosity = {}: expected a number > 0", n.viscosity));
      if (n.steps_in < 1 || n.steps_out < 1)
        throw core::Error(
            fmt::format("t_in / t_out = {} / {}: expected integers >= 1", n.steps_in, n.steps_out));
      check_multiple("ns_record_interval", n.record_interval, "ns_dt", n.dt);
      check_grf("ns_", n.grf);
      check_counts(n.train_samples, n.val_samples);
      break;
    }
    case FnoProblem::RayleighBenard:
    case FnoProblem::RayleighBenard3d: {
      const auto& r = o.rayleigh_benard;
      const bool three_d = o.problem == FnoProblem::RayleighBenard3d;
      if (r.nx < 8 || r.nx % 2 != 0)
        throw core::Error(fmt::format("grid[0] = {}: expected an even integer >= 8", r.nx));
      if (three_d && (r.ny < 8 || r.ny % 2 != 0))
        throw core::Error(fmt::format("grid[1] = {}: expected an even integer >= 8", r.ny));
      if (!three_d && r.ny != 0)
        throw core::Error(fmt::format("ny = {}: expected 0 for rbc2d (a 2-D grid)", r.ny));
      if (r.nz < 8)
        throw core::Error(
            fmt::format("grid[{}] = {}: expected an integer >= 8", three_d ? 2 : 1, r.nz));
      if (!(r.rayleigh > 0.0) || !(r.prandtl > 0.0) || !(r.aspect > 0.0))
        throw core::Error(fmt::format(
            "rbc_rayleigh / rbc_prandtl / rbc_aspect = {} / {} / {}: expected numbers > 0",
            r.rayleigh, r.prandtl, r.aspect));
      if (!(r.dt > 0.0)) throw core::Error(fmt::format("rbc_dt = {}: expected a number > 0", r.dt));
      if (!(r.spinup_time >= 0.0))
        throw core::Error(
            fmt::format("rbc_spinup_time = {}: expected a number >= 0", r.spinup_time));
      if (r.states < 2)
        throw core::Error(fmt::format("rbc_states = {}: expected an integer >= 2", r.states));
      if (r.record_steps < 1)
        throw core::Error(
            fmt::format("rbc_record_steps = {}: expected an integer >= 1", r.record_steps));
      if (!(r.noise_amplitude > 0.0))
        throw core::Error(
            fmt::format("rbc_noise_amplitude = {}: expected a number > 0", r.noise_amplitude));
      if (!(r.cfl_max > 0.0))
        throw core::Error(fmt::format("rbc_cfl_max = {}: expected a number > 0", r.cfl_max));
      check_counts(r.train_samples, r.val_samples);
      break;
    }
  }
}

}  // namespace scaffold::fno
