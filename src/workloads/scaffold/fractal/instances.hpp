// Instances (docs/fractals.md): instance (c, i) is category c with its affine columns scaled by
// row i of the weight table, drawn with the point stream (seed, c, i). A runaway or non-finite
// cloud is retried with attenuated weights (factors 0.5, 0.25, 0.1, then unit weights), reseeded
// identically each time. The raw, unnormalised points are saved as float32 N x 3 .npy files.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "workloads/scaffold/fractal/ifs.hpp"
#include "workloads/scaffold/fractal/library.hpp"

namespace scaffold::fractal {

struct InstanceTask {
  int category = 0;
  int instance = 0;  // row of the weight table, 0..144
};

struct InstanceCloud {
  std::vector<float> points;   // (point_num, 3)
  double weight_factor = 1.0;  // attenuation that succeeded: 1, 0.5, 0.25, 0.1 or 0 (unit)
};

// The attenuation factors tried in order (the first is the table's weights as they are).
const std::vector<double>& instance_weight_factors();

// Reference: one instance, one cloud at a time. Throws core::Error if even unit weights fail.
InstanceCloud generate_instance(const IfsParams& base, const InstanceWeights& weights,
                                uint64_t seed, const InstanceTask& task, int64_t point_num);

struct InstanceStats {
  uint64_t written = 0;
  uint64_t retried = 0;  // instances that needed attenuated weights
  uint64_t points = 0;   // points generated, retries included
};

// Generates and writes the instance files of `tasks` on up to `threads` threads (lanes of
// clouds interleaved, as the category search). `categories[c]` is category c's parameters.
// on_done is called after each file is written (from worker threads).
InstanceStats write_instances(const LibraryLayout& layout, const std::vector<IfsParams>& categories,
                              const std::vector<InstanceTask>& tasks, uint64_t seed, int threads,
                              const std::function<void()>& on_done);

}  // namespace scaffold::fractal
