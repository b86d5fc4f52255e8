// CARAML's operator workload as a TrainingTask (train/loop.hpp): an FNO maps input fields
// (B, C_in, *grid) to output fields (B, C_out, *grid); the loss is the relative L2 error per
// example, averaged over the batch (the paper's LpLoss, a mean instead of its sum so data-
// parallel replicas average to the single-process value). Recurrent time stepping (a rollout of
// one-step predictions) trains on the sum over the steps of each step's relative L2 error, as the
// paper's fourier_2d_time; its reported errors are those of the whole predicted trajectory.
// Validation sums the relative L2 error and the mean squared error per example. With input sharding
// each rank of a shard group takes its slab of the grid's first dimension from the full examples
// the loader gives, and the norms are summed over the group. Precision fp32 or bf16 (autocast; the
// spectral part stays fp32). Legend: B batch, d spatial dimensions.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "profile/profiler.hpp"
#include "train/loop.hpp"
#include "workloads/fno/dist_fft.hpp"
#include "workloads/fno/fno.hpp"

namespace scaffold::fno {

struct FnoTaskOptions {
  std::string precision = "fp32";  // fp32 | bf16
  // 0: direct (one forward gives every output step). n > 0: recurrent, n steps of
  // `step_channels` each: the model maps the last t_in steps (its input channels) to the next
  // step, which replaces the oldest for the following forward (the paper's FNO-2D rollout);
  // training backpropagates through all n.
  int64_t rollout_steps = 0;
  int64_t step_channels = 1;
  // false: one relative L2 error over all channels of an example (the paper's LpLoss); true: the
  // mean over the channels of each channel's own relative L2 error (operator_learning's
  // VectorNormLoss), for the loss and the reported relative errors alike.
  bool field_relative = false;
  std::shared_ptr<const FftShard> shard;  // null: unsharded
  profile::Profiler* profiler = nullptr;
};

// Per example: (B, 3) float64 sums over every channel and point of the whole grid (summed over
// the shard group when sharded, identity backward): squared error, squared target, points.
at::Tensor error_sums(const at::Tensor& pred, const at::Tensor& target, const FftShard& shard);

// (B) relative L2 errors ||pred - target|| / ||target|| over each example's whole grid.
at::Tensor relative_l2(const at::Tensor& pred, const at::Tensor& target, const FftShard& shard);

// (B) the mean over the channels of each channel's relative L2 error over the whole grid
// (operator_learning's VectorNormLoss with absolute: false, before its mean over the batch).
at::Tensor field_relative_l2(const at::Tensor& pred, const at::Tensor& target,
                             const FftShard& shard);

// This rank's slab (the grid's first dimension, dim 2) of a field batch (B, C, *grid).
at::Tensor shard_slab(const at::Tensor& field, const FftShard* shard);

class FnoTask : public train::TrainingTask {
 public:
  FnoTask(Fno model, const data::ExampleSource& train_set, const data::ExampleSource& val_set,
          c10::Device device, FnoTaskOptions options);

  torch::nn::Module& module() override { return *model_; }
  const data::ExampleSource& training_set() const override { return train_set_; }
  const data::ExampleSource& validation_set() const override { return val_set_; }
  std::vector<std::string> training_sum_names() const override { return {"rel_l2"}; }
  std::vector<std::string> validation_sum_names() const override { return {"rel_l2", "mse"}; }
  train::TrainForward train_forward(const data::Batch& batch) override;
  at::Tensor validation_sums(const data::Batch& batch) override;
  void after_step() override;
  void after_validation() override;
  int sum_multiplicity() const override { return options_.shard ? options_.shard->parts() : 1; }
  // train_rel_l2, val_rel_l2, val_mse (means over examples); stop value and val_loss: val_rel_l2.
  // Throws core::Error when a loss is not finite.
  train::EpochMetrics epoch_metrics(int64_t epoch, const train::PassSums& train,
                                    const train::PassSums& val) const override;

  // The model's output (B, C_out, *slab), float32 (float64 for a float64 model), for an input batch
  // (B, C_in, *grid) on the device (this rank's slab taken here), in the task's precision.
  // Recurrent: the rollout's steps concatenated in time order (B, rollout_steps * step_channels,
  // *slab).
  at::Tensor predict(const at::Tensor& input);

  // (B) the configured relative error of each example: relative_l2 or field_relative_l2.
  at::Tensor relative_error(const at::Tensor& pred, const at::Tensor& target,
                            const FftShard& shard) const;

  Fno& model() { return model_; }

 private:
  Fno model_;
  const data::ExampleSource& train_set_;
  const data::ExampleSource& val_set_;
  c10::Device device_;
  FnoTaskOptions options_;
};

}  // namespace scaffold::fno
