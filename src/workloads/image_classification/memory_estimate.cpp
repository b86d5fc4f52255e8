#include "workloads/image_classification/memory_estimate.hpp"

#include <string>

namespace scaffold::imgcls {

double resnet_parameters_estimate(const std::string& model, double num_classes) {
  // torchvision's counts with 1000 classes, and the classifier's input features.
  struct Known {
    const char* name;
    double params_1000;
    double features;
  };
  static const Known kKnown[] = {{"resnet18", 11689512, 512},
                                 {"resnet34", 21797672, 512},
                                 {"resnet50", 25557032, 2048},
                                 {"resnet101", 44549160, 2048},
                                 {"resnet152", 60192808, 2048}};
  for (const Known& k : kKnown)
    if (model == k.name) return k.params_1000 + (num_classes - 1000.0) * (k.features + 1.0);
  return 0.0;
}

core::MemoryEstimate imgcls_memory_estimate(const config::ImageClassificationConfig& cfg,
                                            int64_t local_batch) {
  const auto b = static_cast<double>(local_batch), side = static_cast<double>(cfg.image_size);
  const double act = cfg.precision == "fp32" || cfg.precision == "tf32" ? 4.0 : 2.0;
  // Weights and gradients in float32, plus SGD's momentum buffer when momentum is on.
  const double state = cfg.momentum > 0.0 ? 12.0 : 8.0;
  core::MemoryEstimate e;
  e.add("the ResNet's weights, gradients and optimizer state",
        state * resnet_parameters_estimate(cfg.model, static_cast<double>(cfg.num_classes)),
        {"model", "num_classes"});
  e.add("the input batch (local batch x 3 x image_size^2, float32)", 4.0 * b * 3.0 * side * side,
        {"image_size", "global_batch_size"});
  const double half = side / 2.0, quarter = side / 4.0;
  e.add(
      "the stem's activations kept for the backward pass (local batch x 64 x (image_size/2)^2, "
      "twice, and the "
      "max pool's x (image_size/4)^2)",
      act * b * 64.0 * (2.0 * half * half + quarter * quarter),
      {"image_size", "global_batch_size"});
  return e;
}

}  // namespace scaffold::imgcls
