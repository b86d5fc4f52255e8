// Parameter counts of a model, one rule for every workload.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>

namespace scaffold::nn {

// Trainable parameter elements of `module` and all its submodules. A complex parameter counts its
// real and imaginary parts (the FNO's spectral weights, as the FNO paper's count_params does); for
// real parameters this is the sum of numel().
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace scaffold::nn
