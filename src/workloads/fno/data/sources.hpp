// The training and validation examples of a complete FNO dataset, for the batch loader
// (dataset::ExampleSource). Every example has two fields, both float32:
//   input  (C_in, *grid)   Burgers (1, N): u(., 0); Navier-Stokes (steps_in, H, W): the first
//                          records; Rayleigh-Benard (4, nx, nz): u_x, u_z, b, p at a stored state
//   target (C_out, *grid)  Burgers (1, N): u(., T); Navier-Stokes (steps_out, H, W); Rayleigh-
//                          Benard (4, nx, nz): the next stored state
// Examples are read from the .npy files on every get() (thread-safe; nothing is cached): a
// Rayleigh-Benard example reads two consecutive states of its trajectory file. Normalisation is
// the model's business; meta.input_stats / target_stats hold the training set's statistics.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "dataset/example_source.hpp"
#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

class FnoExampleSource : public dataset::ExampleSource {
 public:
  FnoExampleSource(std::filesystem::path root, FnoSplit split, FnoDataMeta meta);
  std::size_t size() const override;
  // Fields {input, target}; id "<split>/<sample>" or, for trajectories, "<split>/<sample>@<state>".
  // `draw` is ignored. Throws core::FileError naming a missing, truncated or reshaped file.
  dataset::Example get(std::size_t index, uint64_t draw) const override;
  const FnoDataMeta& meta() const { return meta_; }

 private:
  std::filesystem::path root_;
  FnoSplit split_;
  FnoDataMeta meta_;
};

struct FnoSources {
  std::filesystem::path root;
  FnoDataMeta meta;
  std::unique_ptr<FnoExampleSource> train, val;
};

// The dataset `options` name (ensure_fno_dataset makes it). Throws core::FileError naming the
// folder, and how to make it, when it is not there or not complete.
FnoSources make_fno_sources(const FnoDataOptions& options);
// Any complete dataset folder.
FnoSources open_fno_sources(const std::filesystem::path& root);

}  // namespace scaffold::fno
