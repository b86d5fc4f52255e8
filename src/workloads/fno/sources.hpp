// The FNO's data: the training and validation ExampleSources of the configured problem and what
// the model and the figures need to know of them (channels, grid, time steps per example). The
// data is generated in situ by the PDE generators (workloads/fno/data/) into the dataset cache
// keyed by the generator's parameters, or reused from it. Also each problem's channels without
// building its data, for eval mode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "dist/communicator.hpp"
#include "workloads/fno/options.hpp"

namespace scaffold::fno {

struct ProblemShape {
  int64_t in_channels = 1, out_channels = 1;
  int64_t timesteps_per_example = 1;  // time steps an example covers (CARAML's "timesteps")
  int64_t step_channels = 1;          // channels of one time step (rbc2d: u_x, u_z, b, p)
};

// The channels and timesteps of cfg.problem at its t_in / t_out, without its data.
ProblemShape problem_shape(const config::FnoConfig& cfg);

struct FnoData {
  std::unique_ptr<data::ExampleSource> train,
      val;  // fields {input (C_in, *grid), target (C_out, *grid)}
  std::string problem;
  std::vector<int64_t> grid;
  ProblemShape shape;
  double viscosity =
      0.0;  // the value used (the problem's default when the config says 0; rbc2d: sqrt(Pr/Ra))
  std::filesystem::path root;  // the dataset folder in the cache
  bool reused = false;         // found complete in the cache
  int64_t samples_generated = 0, solver_steps = 0;
  double generate_s = 0.0;  // wall time of making or finding the dataset (max over ranks)
};

// Makes (collectively, `threads` workers per rank) or reuses the configured problem's dataset in
// cfg.data_dir and opens its sources. A failure on any rank is a dist::AgreedError on every rank.
FnoData make_fno_data(const config::FnoConfig& cfg, dist::Communicator& comm, int threads);

}  // namespace scaffold::fno
