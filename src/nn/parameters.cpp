#include "nn/parameters.hpp"

#include <ATen/core/Tensor.h>

namespace scaffold::nn {

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& p : module.parameters()) n += p.is_complex() ? 2 * p.numel() : p.numel();
  return n;
}

}  // namespace scaffold::nn
