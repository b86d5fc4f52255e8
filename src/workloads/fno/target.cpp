#include "workloads/fno/target.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "core/error.hpp"

namespace scaffold::fno {

at::Tensor current_state(const at::Tensor& input, int64_t out_channels, int64_t step_channels,
                         int64_t channel_dim) {
  const int64_t c_in = input.size(channel_dim);
  if (step_channels < 1 || c_in < step_channels || c_in % step_channels != 0 ||
      out_channels % step_channels != 0)
    throw core::Error(fmt::format(
        "update target: {} input and {} output channels are not whole time steps of {} channels",
        c_in, out_channels, step_channels));
  const at::Tensor last = input.narrow(channel_dim, c_in - step_channels, step_channels);
  const std::vector<at::Tensor> copies(static_cast<std::size_t>(out_channels / step_channels),
                                       last);
  return at::cat(copies, channel_dim);
}

at::Tensor update_target(const at::Tensor& input, const at::Tensor& next, int64_t step_channels,
                         double scaling, int64_t channel_dim) {
  return (next - current_state(input, next.size(channel_dim), step_channels, channel_dim)) *
         scaling;
}

at::Tensor next_from_update(const at::Tensor& input, const at::Tensor& update,
                            int64_t step_channels, double scaling, int64_t channel_dim) {
  return update / scaling +
         current_state(input, update.size(channel_dim), step_channels, channel_dim);
}

UpdateTargetSource::UpdateTargetSource(std::unique_ptr<data::ExampleSource> inner,
                                       int64_t step_channels, double scaling)
    : inner_(std::move(inner)), step_channels_(step_channels), scaling_(scaling) {
  SCAFFOLD_CHECK(scaling_ > 0.0, fmt::format("update target: scaling {} (expected > 0)", scaling_));
}

data::Example UpdateTargetSource::get(std::size_t index, uint64_t draw) const {
  data::Example e = inner_->get(index, draw);
  SCAFFOLD_CHECK(e.fields.size() == 2,
                 fmt::format("update target: example {} has {} fields, expected input and target",
                             e.id, e.fields.size()));
  e.fields[1] = update_target(e.fields[0], e.fields[1], step_channels_, scaling_).contiguous();
  return e;
}

}  // namespace scaffold::fno
