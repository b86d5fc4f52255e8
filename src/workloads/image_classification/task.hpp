// CARAML's image-classification workload as a TrainingTask (train/loop.hpp): a ResNet on
// (B, 3, S, S) images with integer labels, mean cross-entropy, top-1 accuracy in training and
// top-1/top-5 in validation. Precision fp32, bf16 (autocast), tf32 and fp16 (CUDA only); fp16
// and bf16 with the loop's dynamic loss scaling (the driver's); channels-last inputs when the model
// is channels-last. With synthetic_device the sources carry only labels (the image seeds follow
// from the ids), and the images are drawn on the training device (no host-to-device image traffic,
// CARAML's device-side data).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "profile/profiler.hpp"
#include "train/loop.hpp"
#include "workloads/image_classification/resnet.hpp"

namespace scaffold::imgcls {

// What the run's TF32 setting did (apply_tf32): the flags read back from LibTorch's global
// context after setting them. On a CPU nothing is set and `applies` is false.
struct Tf32State {
  bool requested = true;  // the config's tf32 key
  bool applies = false;   // a CUDA device with a LibTorch that has the switches
  bool cudnn = false;     // cuDNN convolutions may use TF32
  bool cublas = false;    // cuBLAS matmuls may use TF32
  std::string reason;     // why it does not apply ("cpu", "LibTorch < 1.7"); "" when it does
  // "cudnn+cublas", "cudnn", "cublas", "off", or "none(<reason>)": the result table's TF32 cell.
  std::string effect() const;
};

// Sets LibTorch's process-wide TF32 switches for `device` as CARAML's trainer leaves them
// (image_classification_torch.py: precision tf32 sets torch.backends.cuda.matmul.allow_tf32 =
// True, fp16/bf16 set it False, fp32 keeps PyTorch's defaults, which since 1.12 are cuBLAS off and
// cuDNN on): with tf32 = true, cuDNN on and cuBLAS on only for precision tf32; with tf32 = false
// both off. Does nothing on a non-CUDA device. Throws core::Error for precision tf32 with tf32 =
// false. The driver calls it once, before system.json is written; ClassificationTask leaves the
// switches alone.
Tf32State apply_tf32(bool tf32, const std::string& precision, c10::Device device);

// system.json's `kernels` entries for it: {"tf32=<0|1>", "tf32_effect=<effect()>"}.
std::vector<std::string> tf32_kernel_entries(const Tf32State& state);

struct ClassificationTaskOptions {
  std::string precision = "fp32";  // fp32 | bf16 | tf32 | fp16
  bool channels_last = true;
  bool synthetic_device = false;  // fields are {label}: draw the images on the device
  int64_t image_size = 224;       // S, for synthetic_device
  profile::Profiler* profiler = nullptr;
};

// Labels for synthetic_device: fields {label () int64}, id "synthetic_device:<offset + i>".
// Example i is deterministic from (seed, offset + i), like SyntheticImages; so is its image seed.
class DeviceSyntheticLabels : public data::ExampleSource {
 public:
  DeviceSyntheticLabels(int64_t count, int64_t num_classes, uint64_t seed, int64_t offset);
  std::size_t size() const override { return static_cast<std::size_t>(count_); }
  data::Example get(std::size_t index, uint64_t draw) const override;
  // The image seed of the example whose id is `id` ("synthetic_device:<n>"), from the id alone:
  // the task draws a batch's images from it without reading anything back from the device (a
  // host synchronisation in every step). Throws core::Error on an id of another source.
  int64_t image_seed(const std::string& id) const;

 private:
  uint64_t key_of(int64_t example) const;
  int64_t count_, num_classes_;
  uint64_t seed_;
  int64_t offset_;
};

class ClassificationTask : public train::TrainingTask {
 public:
  ClassificationTask(ResNet model, const data::ExampleSource& train_set,
                     const data::ExampleSource& val_set, c10::Device device,
                     ClassificationTaskOptions options);

  torch::nn::Module& module() override { return *model_; }
  const data::ExampleSource& training_set() const override { return train_set_; }
  const data::ExampleSource& validation_set() const override { return val_set_; }
  std::vector<std::string> training_sum_names() const override { return {"loss_x_batch", "top1"}; }
  std::vector<std::string> validation_sum_names() const override {
    return {"loss_x_batch", "top1", "top5"};
  }
  train::TrainForward train_forward(const data::Batch& batch) override;
  at::Tensor validation_sums(const data::Batch& batch) override;
  void after_step() override;
  void after_validation() override;
  // train_loss, train_top1, val_loss, val_top1, val_top5 (accuracies as fractions); the stop
  // value is val_top1. Throws core::Error when a loss is not finite.
  train::EpochMetrics epoch_metrics(int64_t epoch, const train::PassSums& train,
                                    const train::PassSums& val) const override;

  ResNet& model() { return model_; }

 private:
  // (B, 3, S, S) on the device in the model's memory format, and the labels (B).
  std::pair<at::Tensor, at::Tensor> inputs(const data::Batch& batch) const;
  at::Tensor logits(const at::Tensor& images);

  ResNet model_;
  const data::ExampleSource& train_set_;
  const data::ExampleSource& val_set_;
  c10::Device device_;
  ClassificationTaskOptions options_;
};

// Correct predictions among the k highest logits, summed over the batch: logits (B, K), labels (B).
at::Tensor topk_correct(const at::Tensor& logits, const at::Tensor& labels, int64_t k);

}  // namespace scaffold::imgcls
