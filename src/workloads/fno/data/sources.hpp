// The training and validation examples of a complete FNO dataset, for the batch loader
// (data::ExampleSource). Every example has two fields, both float32:
//   input  (C_in, *grid)   burgers1d (1, N): u(., 0); navier_stokes2d (t_in, N, N): the first
//                          records; rbc2d (4 t_in, nx, nz): t_in consecutive stored states, each
//                          u_x, u_z, b, p (time-major: state 0's four fields, then state 1's, ...)
//   target (C_out, *grid)  burgers1d (t_out, N): u(., t_j); navier_stokes2d (t_out, N, N): the
//                          next records; rbc2d (4 t_out, nx, nz): the t_out states that follow
// Examples are read from the .npy files on every get() (thread-safe; nothing is cached); an rbc2d
// example reads t_in + t_out adjacent states of its trajectory with one seek. Normalisation is
// the model's business: meta.input_stats / target_stats are the training set's per-channel
// statistics (for rbc2d per field u_x, u_z, b, p over the input and target states).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/example_source.hpp"
#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

// How a dataset's samples are cut into examples; none of it is part of the cache key.
struct FnoSourceOptions {
  int64_t train_examples = 0;  // the first N examples of each split; 0: all of them
  int64_t val_examples = 0;
  int64_t rbc_steps_in = 1;   // rbc2d: stored states in the input
  int64_t rbc_steps_out = 1;  // rbc2d: states predicted
};

class FnoExampleSource : public data::ExampleSource {
 public:
  // Throws core::Error when `count` examples do not fit the split.
  FnoExampleSource(std::filesystem::path root, FnoSplit split, FnoDataMeta meta,
                   const FnoSourceOptions& options);
  std::size_t size() const override { return static_cast<std::size_t>(count_); }
  // Fields {input, target}; id "<split>/<sample>" or, for trajectories, "<split>/<sample>@<state>".
  // `draw` is ignored. Throws core::FileError naming a missing, truncated or reshaped file.
  data::Example get(std::size_t index, uint64_t draw) const override;

 private:
  std::filesystem::path root_;
  FnoSplit split_;
  FnoDataMeta meta_;
  int64_t steps_in_ = 1, steps_out_ = 1;
  int64_t per_sample_ = 1;  // examples per stored sample
  int64_t count_ = 0;
};

struct FnoSources {
  std::filesystem::path root;
  FnoDataMeta meta;
  std::unique_ptr<FnoExampleSource> train, val;
  // What the model needs: its channels and grid, and how many time steps one example predicts
  // (CARAML's timesteps: the throughput figure counts them).
  int64_t in_channels = 1, out_channels = 1;
  std::vector<int64_t> grid;
  int64_t timesteps_per_example = 1;
};

// The dataset `options` name (ensure_fno_dataset makes it). Throws core::FileError naming the
// folder, and how to make it, when it is not there or not complete.
FnoSources make_fno_sources(const FnoDataOptions& options, const FnoSourceOptions& sources = {});
// Any complete dataset folder.
FnoSources open_fno_sources(const std::filesystem::path& root,
                            const FnoSourceOptions& sources = {});

}  // namespace scaffold::fno
