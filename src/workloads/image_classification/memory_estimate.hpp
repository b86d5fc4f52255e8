// The memory an image_classification configuration certainly needs on each rank before anything
// is allocated (core/memory_budget.hpp checks it): the ResNet's weights, gradients and SGD
// momentum, and, per image of the local batch, the input and the stem's activations kept for the
// backward pass (the first convolution's and BatchNorm's outputs at half the image side and the
// max pool's at a quarter). The deeper stages hold more; this is a lower bound. Torch-free.
#pragma once

#include <cstdint>

#include "core/memory_budget.hpp"
#include "workloads/image_classification/options.hpp"

namespace scaffold::imgcls {

// torchvision's ResNet parameter count for `model` (resnet18 ... resnet152) with `num_classes`
// outputs; 0 for an unknown model name.
double resnet_parameters_estimate(const std::string& model, double num_classes);

// `local_batch`: the images one rank trains at once (global_batch_size / ranks).
core::MemoryEstimate imgcls_memory_estimate(const config::ImageClassificationConfig& cfg,
                                            int64_t local_batch);

}  // namespace scaffold::imgcls
