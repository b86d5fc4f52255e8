// Tiny datasets of each problem for the cache, generation and source tests (seconds in all),
// and file snapshots for byte-for-byte comparisons.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "core/fs.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno::test {

inline FnoDataOptions tiny_options(FnoProblem problem, const std::filesystem::path& dir) {
  FnoDataOptions o;
  o.problem = problem;
  o.seed = 5;
  o.dataset_dir = dir;
  o.code_commit = "test";
  o.burgers = BurgersOptions{32, 64, 0.1, 0.1, 0.01, 2, GrfOptions{625.0, 5.0, 2.0}, 3, 2};
  o.navier_stokes =
      NavierStokesOptions{16, 16, 1e-3, 0.1, 2, 3, 0.1, 0.05, GrfOptions{343.0, 7.0, 2.5}, 3, 2};
  RayleighBenardOptions& r = o.rayleigh_benard;
  r.nx = 16;
  r.nz = 9;
  r.rayleigh = 1e4;
  r.aspect = 2.0;
  r.dt = 0.05;
  r.spinup_time = 0.5;
  r.states = 4;
  r.noise_amplitude = 0.1;
  r.train_samples = 2;
  r.val_samples = 1;
  if (problem == FnoProblem::RayleighBenard3d) {  // 8 x 8 x 9 on a 2 x 2 x 1 box
    r.nx = 8;
    r.ny = 8;
  }
  return o;
}

// Every regular file below `root` (relative path -> bytes), except meta.json, which holds a
// timestamp and timings.
inline std::map<std::string, std::string> snapshot(const std::filesystem::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().filename() != "meta.json")
      files[std::filesystem::relative(e.path(), root).string()] = core::read_file(e.path());
  return files;
}

}  // namespace scaffold::fno::test
