// set_memory_format: set_data with a re-strided copy, under no_grad, for the tensors whose rank
// the format covers.
#include "nn/memory_format.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

namespace scaffold::nn {

namespace {

bool applies(at::MemoryFormat format, int64_t dim) {
  switch (format) {
    case at::MemoryFormat::ChannelsLast:
      return dim == 4;
    case at::MemoryFormat::ChannelsLast3d:
      return dim == 5;
    case at::MemoryFormat::Contiguous:
      return dim == 4 || dim == 5;
    default:
      return false;
  }
}

}  // namespace

void set_memory_format(torch::nn::Module& module, at::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : module.parameters())
    if (applies(format, p.dim())) p.set_data(p.contiguous(format));
  for (at::Tensor& b : module.buffers())
    if (applies(format, b.dim())) b.set_data(b.contiguous(format));
}

}  // namespace scaffold::nn
