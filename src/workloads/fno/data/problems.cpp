// The generators. Each checks its solver's health where the data is recorded: Burgers by
// the maximum principle (viscous Burgers never grows max |u|), Navier-Stokes and Rayleigh-Benard
// by the advective CFL number; any non-finite value is an error.
#include "workloads/fno/data/problems.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "workloads/fno/data/burgers.hpp"
#include "workloads/fno/data/grf.hpp"
#include "workloads/fno/data/navier_stokes.hpp"
#include "workloads/fno/data/rayleigh_benard.hpp"
#include "workloads/fno/data/rayleigh_benard_3d.hpp"

namespace scaffold::fno {
namespace {

constexpr uint64_t kFnoStream = 0x666e6f2d64617461ULL;  // "fno-data"
// ETDRK4's explicit stability reaches about 2.8 on the imaginary axis; the fastest advected mode
// (|k| = n/3) moves 2 pi/3 ~ 2.1 times the CFL number defined here, so 1.0 leaves a margin.
constexpr double kSpectralCflMax = 1.0;
constexpr int64_t kRbcCheckEvery = 50;  // solver steps between stability checks while spinning up

int64_t round_steps(double interval, double dt) {
  return static_cast<int64_t>(std::llround(interval / dt));
}

std::string sample_name(FnoProblem p, FnoSplit split, int64_t index) {
  return fmt::format("{} sample {} of {}", problem_name(p), index, split_name(split));
}

at::Tensor to_float(const at::Tensor& t) {
  return t.to(at::kFloat).contiguous();
}

// The solver options both Rayleigh-Benard solvers share, from the dataset's.
template <class SolverOptions>
SolverOptions rbc_solver_options(const RayleighBenardOptions& r) {
  SolverOptions s;
  s.nx = r.nx;
  s.nz = r.nz;
  s.rayleigh = r.rayleigh;
  s.prandtl = r.prandtl;
  s.aspect = r.aspect;
  s.dt = r.dt;
  return s;
}

}  // namespace

uint64_t sample_stream(const FnoDataOptions& o, FnoSplit split, int64_t index) {
  return core::stream_key({o.seed, kFnoStream, static_cast<uint64_t>(o.problem),
                           static_cast<uint64_t>(split), static_cast<uint64_t>(index)});
}

struct SampleGenerator::Impl {
  FnoDataOptions options;
  std::optional<BurgersSolver> burgers;
  std::optional<NavierStokesSolver> navier_stokes;
  std::optional<RayleighBenardSolver> rayleigh_benard;
  std::optional<RayleighBenard3dSolver> rayleigh_benard_3d;

  GeneratedSample burgers_sample(FnoSplit split, int64_t index) const;
  GeneratedSample navier_stokes_sample(FnoSplit split, int64_t index) const;
  template <class Solver>
  GeneratedSample rayleigh_benard_sample(const Solver& solver, FnoSplit split, int64_t index) const;
};

GeneratedSample SampleGenerator::Impl::burgers_sample(FnoSplit split, int64_t index) const {
  const auto& b = options.burgers;
  const at::Tensor u0 = grf_1d(b.solver_grid, b.grf, sample_stream(options, split, index));
  const int64_t per_snapshot = round_steps(b.final_time / static_cast<double>(b.steps_out), b.dt);
  const int64_t stride = b.solver_grid / b.grid;
  const double before = u0.abs().max().item<double>();
  at::Tensor u = u0;
  std::vector<at::Tensor> snapshots;
  for (int64_t j = 1; j <= b.steps_out; ++j) {
    u = burgers->advance(u, per_snapshot);
    const double after = u.abs().max().item<double>();
    if (!u.isfinite().all().item<bool>() || after > before * (1.0 + 1e-6) + 1e-12)
      throw core::Error(fmt::format(
          "{}: the Burgers solver went unstable (max |u| {} -> {} at t = {}, which viscous "
          "Burgers cannot do): use a smaller burgers_dt than {}",
          sample_name(options.problem, split, index), before, after,
          static_cast<double>(j * per_snapshot) * b.dt, b.dt));
    snapshots.push_back(u.slice(0, 0, b.solver_grid, stride));
  }
  GeneratedSample s;
  s.arrays = {to_float(u0.slice(0, 0, b.solver_grid, stride).unsqueeze(0)),
              to_float(at::stack(snapshots))};
  s.solver_steps = per_snapshot * b.steps_out;
  return s;
}

GeneratedSample SampleGenerator::Impl::navier_stokes_sample(FnoSplit split, int64_t index) const {
  const auto& n = options.navier_stokes;
  at::Tensor w = grf_2d(n.solver_grid, n.grf, sample_stream(options, split, index));
  const int64_t per_record = round_steps(n.record_interval, n.dt);
  const int64_t stride = n.solver_grid / n.grid;
  std::vector<at::Tensor> frames;
  for (int64_t r = 1; r <= n.steps_in + n.steps_out; ++r) {
    w = navier_stokes->advance(w, per_record);
    const double cfl = w.isfinite().all().item<bool>() ? navier_stokes->cfl(w) : INFINITY;
    if (!(cfl <= kSpectralCflMax))
      throw core::Error(
          fmt::format("{}: CFL number {} at t = {} (limit {}): use a smaller ns_dt than {}",
                      sample_name(options.problem, split, index), cfl,
                      static_cast<double>(r) * n.record_interval, kSpectralCflMax, n.dt));
    frames.push_back(w.slice(0, 0, n.solver_grid, stride).slice(1, 0, n.solver_grid, stride));
  }
  const at::Tensor all = at::stack(frames);
  GeneratedSample s;
  s.arrays = {to_float(all.slice(0, 0, n.steps_in)), to_float(all.slice(0, n.steps_in))};
  s.solver_steps = per_record * (n.steps_in + n.steps_out);
  return s;
}

// One trajectory of either Rayleigh-Benard solver: both have initial_state, step, cfl and fields
// (fields() gives the stored state's channels: 4 in 2-D, 5 in 3-D).
template <class Solver>
GeneratedSample SampleGenerator::Impl::rayleigh_benard_sample(const Solver& solver, FnoSplit split,
                                                              int64_t index) const {
  const auto& r = options.rayleigh_benard;
  auto state = solver.initial_state(r.noise_amplitude, sample_stream(options, split, index));
  auto check = [&] {
    const double cfl =
        state.theta.isfinite().all().template item<bool>() ? solver.cfl(state) : INFINITY;
    if (!(cfl <= r.cfl_max))
      throw core::Error(fmt::format(
          "{}: CFL number {} at t = {} (limit rbc_cfl_max = {}): use a smaller rbc_dt "
          "than {}",
          sample_name(options.problem, split, index), cfl, state.time, r.cfl_max, r.dt));
  };
  const int64_t spinup = round_steps(r.spinup_time, r.dt);
  for (int64_t k = 1; k <= spinup; ++k) {
    solver.step(&state);
    if (k % kRbcCheckEvery == 0) check();
  }
  at::Tensor states;
  for (int64_t s = 0; s < r.states; ++s) {
    if (s > 0)
      for (int64_t k = 0; k < r.record_steps; ++k) solver.step(&state);
    check();
    const at::Tensor fields = solver.fields(state);
    if (!fields.isfinite().all().template item<bool>())
      throw core::Error(
          fmt::format("{}: a non-finite value at t = {}: use a smaller rbc_dt than {}",
                      sample_name(options.problem, split, index), state.time, r.dt));
    if (s == 0) {
      std::vector<int64_t> shape{r.states};
      for (int64_t d : fields.sizes()) shape.push_back(d);
      states = at::empty(shape, at::kFloat);
    }
    states[s].copy_(fields);
  }
  GeneratedSample out;
  out.arrays = {states};
  out.solver_steps = state.steps;
  return out;
}

SampleGenerator::SampleGenerator(const FnoDataOptions& options) : impl_(std::make_unique<Impl>()) {
  validate(options);
  impl_->options = options;
  switch (options.problem) {
    case FnoProblem::Burgers:
      impl_->burgers.emplace(BurgersSolverOptions{options.burgers.solver_grid,
                                                  options.burgers.viscosity, options.burgers.dt});
      break;
    case FnoProblem::NavierStokes: {
      const auto& n = options.navier_stokes;
      impl_->navier_stokes.emplace(
          NavierStokesSolverOptions{n.solver_grid, n.viscosity, n.dt, n.forcing_amplitude});
      break;
    }
    case FnoProblem::RayleighBenard:
      impl_->rayleigh_benard.emplace(
          rbc_solver_options<RayleighBenardSolverOptions>(options.rayleigh_benard));
      break;
    case FnoProblem::RayleighBenard3d: {
      auto s = rbc_solver_options<RayleighBenard3dSolverOptions>(options.rayleigh_benard);
      s.ny = options.rayleigh_benard.ny;
      impl_->rayleigh_benard_3d.emplace(s);
      break;
    }
  }
}

SampleGenerator::~SampleGenerator() = default;

GeneratedSample SampleGenerator::generate(FnoSplit split, int64_t index) const {
  switch (impl_->options.problem) {
    case FnoProblem::Burgers:
      return impl_->burgers_sample(split, index);
    case FnoProblem::NavierStokes:
      return impl_->navier_stokes_sample(split, index);
    case FnoProblem::RayleighBenard:
      return impl_->rayleigh_benard_sample(*impl_->rayleigh_benard, split, index);
    case FnoProblem::RayleighBenard3d:
      return impl_->rayleigh_benard_sample(*impl_->rayleigh_benard_3d, split, index);
  }
  return {};
}

}  // namespace scaffold::fno
