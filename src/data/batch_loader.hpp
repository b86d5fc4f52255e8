// Batches from any ExampleSource (the fractal volumes, the other workloads' images, sequences
// and PDE pairs), prefetched on background threads so loading overlaps compute.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/example_source.hpp"

namespace scaffold::data {

// The source's fields stacked along a new first dimension: e.g. for the fractal volumes
// fields[0] = image (B, 3, d, h, w) float32 and fields[1] = mask (B, d, h, w) int64.
struct Batch {
  std::vector<at::Tensor> fields;
  std::vector<std::string> ids;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

// Batches of `batch_size` examples in the order of `indices` (the last one may be smaller),
// loaded ahead by `workers` threads (0: load on the calling thread); pinned host memory when
// pin_memory is set and CUDA is available. Example indices[i] is read with the augmentation key
// core::stream_key({draw_key, indices[i]}), so augmentation depends on the example and the
// caller's key (seed and epoch), never on the worker that read it. The first loading error is
// rethrown by next().
class BatchLoader {
 public:
  BatchLoader(const ExampleSource& source, std::vector<int64_t> indices, int batch_size,
              int workers, bool pin_memory, uint64_t draw_key = 0);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Fills *out with the next batch; false when the epoch is done.
  bool next(Batch* out);
  std::size_t batches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaffold::data
