// What the FNO learns to predict: the next state(s) themselves (`next`, the paper's setting) or
// operator_learning's scaled update (`update`, its outType: update with outScaling s): the
// target (next - current) x s, "current" being the input's last time step, the same for every
// predicted step. Its inverse turns a predicted update back into the next state, as
// operator_learning's inference does (pred / s + input). Applied to the examples as they are
// read (UpdateTargetSource), so the cached dataset stays the same for both targets.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "data/example_source.hpp"

namespace scaffold::fno {

// The input's last time step (its last `step_channels` channels along `channel_dim`) repeated
// once per step of `next`: the "current" state each predicted step is measured from.
at::Tensor current_state(const at::Tensor& input, int64_t out_channels, int64_t step_channels,
                         int64_t channel_dim = 0);

// (next - current) x scaling; input (C_in, *grid) and next (C_out, *grid) along channel_dim.
at::Tensor update_target(const at::Tensor& input, const at::Tensor& next, int64_t step_channels,
                         double scaling, int64_t channel_dim = 0);

// The inverse: update / scaling + current.
at::Tensor next_from_update(const at::Tensor& input, const at::Tensor& update,
                            int64_t step_channels, double scaling, int64_t channel_dim = 0);

// A source whose examples {input, next} become {input, update_target(input, next)}.
class UpdateTargetSource : public data::ExampleSource {
 public:
  UpdateTargetSource(std::unique_ptr<data::ExampleSource> inner, int64_t step_channels,
                     double scaling);
  std::size_t size() const override { return inner_->size(); }
  data::Example get(std::size_t index, uint64_t draw) const override;
  std::string origin(std::size_t index) const override { return inner_->origin(index); }

 private:
  std::unique_ptr<data::ExampleSource> inner_;
  int64_t step_channels_;
  double scaling_;
};

}  // namespace scaffold::fno
