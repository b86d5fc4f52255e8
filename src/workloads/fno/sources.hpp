// The FNO's data: the training and validation ExampleSources of the configured problem and what
// the model and the figures need to know of them (channels, grid, time steps per example). The
// `heat` fixture is ours (heat_source.hpp); the PDE problems come from the data generators
// (workloads/fno/data/). Also each problem's channels without building its data, for eval mode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/fno_options.hpp"
#include "dataset/example_source.hpp"

namespace scaffold::fno {

struct ProblemShape {
  int64_t in_channels = 1, out_channels = 1;
  int64_t timesteps_per_example = 1;  // time steps an example covers (CARAML's "timesteps")
};

// The channels and timesteps of cfg.problem at its t_in / t_out, without its data.
ProblemShape problem_shape(const config::FnoConfig& cfg);

struct FnoData {
  std::unique_ptr<dataset::ExampleSource> train, val;  // fields {input (C_in, *grid), target (C_out, *grid)}
  std::string problem;
  std::vector<int64_t> grid;
  ProblemShape shape;
  double viscosity = 0.0;  // the value used (the problem's default when the config says 0)
};

// Builds (or loads from cfg.data_dir) the configured problem's data. Throws core::Error naming the
// key when the problem is not available in this build.
FnoData make_fno_data(const config::FnoConfig& cfg);

}  // namespace scaffold::fno
