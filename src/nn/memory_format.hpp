// The memory layout of a model's weights: LibTorch 1.13's Module::to has no memory-format
// overload, so the 4-D (images) or 5-D (volumes) parameters and buffers are converted here, in
// place, keeping each tensor's identity (optimiser state, gradient hooks and autograd stay valid).
// Feed inputs in the same format: convolutions then run NHWC / NDHWC kernels throughout.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>
#include <torch/nn/module.h>

namespace scaffold::nn {

// Converts every parameter and buffer of `module` that `format` applies to: 4-D for ChannelsLast,
// 5-D for ChannelsLast3d, 4-D and 5-D for Contiguous (back to NCHW / NCDHW). Others stay as
// they are (biases, norms' weights, counters).
void set_memory_format(torch::nn::Module& module, at::MemoryFormat format);

// Whether a 5-D tensor is laid out channels-last (and not also contiguous, as tensors with one
// channel or one voxel are): the layout the CPU kernels read and write as it is.
inline bool is_channels_last_3d(const at::Tensor& x) {
  return !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast3d);
}

// The memory format of a 5-D tensor that is channels-last or contiguous.
inline at::MemoryFormat volume_format(bool channels_last) {
  return channels_last ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::Contiguous;
}

}  // namespace scaffold::nn
