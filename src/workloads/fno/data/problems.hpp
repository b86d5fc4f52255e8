// One sample of each problem, made from its options and its (seed, split, index) alone: draw the
// initial condition from a stream keyed by them, run the solver, subsample, convert to float32.
// A sample is the unit of work, of resumption and of determinism: it is computed by one thread
// with LibTorch's intra-op threads at 1, so its bytes do not depend on how many threads or ranks
// share the work. Fails loudly (core::Error naming the key to change) when the solver goes
// unstable instead of writing garbage.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/fno/data/cache.hpp"
#include "workloads/fno/data/options.hpp"

namespace scaffold::fno {

// The key of sample `index` of `split`'s random stream.
uint64_t sample_stream(const FnoDataOptions& options, FnoSplit split, int64_t index);

struct GeneratedSample {
  std::vector<at::Tensor> arrays;  // float32, contiguous, shaped as problem_layout().files
  int64_t solver_steps = 0;
};

// Built once per dataset (the solver and its coefficients); generate() is const and may be
// called from several threads at once.
class SampleGenerator {
 public:
  explicit SampleGenerator(const FnoDataOptions& options);
  ~SampleGenerator();
  SampleGenerator(const SampleGenerator&) = delete;
  SampleGenerator& operator=(const SampleGenerator&) = delete;

  GeneratedSample generate(FnoSplit split, int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaffold::fno
