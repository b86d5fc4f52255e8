// GPT pre-training as a TrainingTask (train/loop.hpp): each example is tokens (S + 1); the model
// reads tokens[:-1] and predicts tokens[1:], the loss is the mean per-token cross-entropy over
// the micro-batch (Megatron's "lm loss"); validation sums the same. Precision fp32, bf16 autocast
// or fp16 autocast (CUDA; the loop scales the loss). Also what the loop takes from the task for
// Megatron's optimizer: AdamW with weight decay on matrices only, and the gradient-norm clip
// over the model-parallel shards (replicated parameters counted once). With pipeline stages the
// task runs an iteration's micro-batches through a pipeline schedule (forward_backward, the
// loop's hook) and only the last stage computes the loss.
// Legend: B micro-batch, S sequence, P pipeline stages, t tensor-parallel size.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/dnnl_linear.hpp"
#include "nn/autocast.hpp"
#include "profile/profiler.hpp"
#include "train/loop.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/pipeline.hpp"

namespace scaffold::llm {

struct GptTaskOptions {
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (CUDA only)
  profile::Profiler* profiler = nullptr;
  // The pipeline this rank is a stage of (its stage must be the model's); null: one stage.
  std::shared_ptr<const PipelineParallel> pipeline;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  // The ranks whose gradient squares add up to the model's norm: the t x P ranks holding one copy
  // of the model, or every rank when the distributed optimizer leaves each data-parallel rank its
  // slice of the gradient only (zeros elsewhere); null: the tensor-parallel group.
  std::shared_ptr<dist::TensorComm> norm_group;
};

class GptTask : public train::TrainingTask {
 public:
  // Throws core::Error for an unknown precision or fp16 off CUDA.
  GptTask(Gpt model, const data::ExampleSource& train_set, const data::ExampleSource& val_set,
          c10::Device device, GptTaskOptions options);

  torch::nn::Module& module() override { return *model_; }
  const data::ExampleSource& training_set() const override { return train_set_; }
  const data::ExampleSource& validation_set() const override { return val_set_; }
  std::vector<std::string> training_sum_names() const override {
    return {"loss_x_tokens", "tokens"};
  }
  std::vector<std::string> validation_sum_names() const override {
    return {"loss_x_tokens", "tokens"};
  }
  train::TrainForward train_forward(const data::Batch& batch) override;
  // With pipeline stages (the loop's forward_backward hook): the iteration's micro-batches
  // through this stage in the schedule's order, activations and gradients exchanged with the
  // neighbouring stages. The returned sums are the last stage's x P (zeros elsewhere), so that
  // dividing the world's sums by sum_multiplicity() counts each micro-batch once.
  at::Tensor forward_backward(train::MicroBatchRun& run);
  bool pipelined() const { return options_.pipeline && options_.pipeline->stage.size > 1; }
  at::Tensor validation_sums(const data::Batch& batch) override;
  void after_step() override;
  void after_validation() override;
  // Every rank of a tensor-parallel group computes the same loss (with pipeline stages: t x P).
  int sum_multiplicity() const override;
  // lm_loss and val_loss (NaN when the epoch had no validation); the stop value is -val_loss.
  // Throws core::Error when the training loss is not finite.
  train::EpochMetrics epoch_metrics(int64_t epoch, const train::PassSums& train,
                                    const train::PassSums& val) const override;

  // The global gradient norm over every shard (sharded parameters' squares summed over the
  // model-parallel group, replicated ones once, the tied embedding of the last stage not at all:
  // the first stage's is the same), then grads *= max_norm / (norm + 1e-6) when
  // that is < 1 (torch's clip_grad_norm_), through train::scale_gradients: a fused CPU
  // `optimizer` takes the factor into its next step instead. max_norm <= 0: measure only.
  // Returns the norm, a tensor on the device (reading it waits for the device).
  at::Tensor clip_gradients(double max_norm, torch::optim::Optimizer* optimizer = nullptr);
  // The sequence-parallel LayerNorm and bias gradients summed over the tensor-parallel group
  // (GptImpl::reduce_sequence_parallel_gradients); the loop's finish_gradients hook.
  void reduce_sequence_parallel_gradients() { model_->reduce_sequence_parallel_gradients(); }
  // The tied embedding's two copies (first and last stage) get the sum of their gradients
  // (Megatron's embedding all-reduce); a no-op with one stage. Call after the data-parallel
  // reduction, before the gradients are read.
  void reduce_embedding_gradients();
  double last_grad_norm() const;  // the last step's global gradient norm (a host read)

  Gpt& model() { return model_; }

 private:
  // (B, S) per-token losses of a batch {tokens (B, S + 1)} under the precision's autocast.
  at::Tensor token_losses(const data::Batch& batch);
  nn::AutocastState autocast_state() const;
  // The pipeline's validation forward: the last stage's loss sums x P, zeros elsewhere.
  at::Tensor pipeline_validation_sums(const data::Batch& batch);
  // The (B, S'', h) activation shape and options passed between stages for tokens (B, S + 1).
  std::vector<int64_t> activation_shape(const at::Tensor& tokens) const;

  Gpt model_;
  const data::ExampleSource& train_set_;
  const data::ExampleSource& val_set_;
  c10::Device device_;
  GptTaskOptions options_;
  at::Tensor last_grad_norm_;  // on the device, read when logged
};

// Megatron's Adam: decoupled weight decay (AdamW) on parameters of 2 or more dimensions,
// none on biases and LayerNorm parameters (1-D), as its no_weight_decay_cond.
struct AdamOptions {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.1;
  // The one-pass update on CPUs (kernels::FusedAdamW, ShardedAdamW's fused slices; the config's
  // optimizer_kernel fused); false: LibTorch's AdamW operations (libtorch, the reference).
  bool fused = true;
};
std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>
megatron_adam(AdamOptions options);
// The config's optimizer_kernel for a run on `device`: whether AdamOptions::fused. auto is fused on
// a CPU; fused off the CPU is refused naming the key and the device.
bool fused_optimizer(const std::string& optimizer_kernel, const c10::Device& device);

// The config's gemm_kernel for a run on `device`: auto is the probe on a CPU and LibTorch
// elsewhere; probe and onednn off the CPU, or in a build without oneDNN, are errors naming the key.
kernels::GemmKernel gemm_kernel(const std::string& gemm_kernel, const c10::Device& device);

// The config's gelu_kernel for a run on `device`: whether the MLP runs kernels::gelu_tanh. auto is
// native on a CPU; native off the CPU is a core::Error naming the key.
bool native_gelu(const std::string& gelu_kernel, const c10::Device& device);
// The config's loss_kernel for a run on `device` with `tensor_parallel` ranks in `precision`:
// whether the output layer's loss runs kernels::linear_cross_entropy (GptOptions::native_loss).
// auto is native where the kernel takes every call (a CPU, one tensor-parallel rank, fp32, or bf16
// on a CPU with bf16 products: kernels::cpu_has_bf16_products), so that system.json's choice is
// what runs; native is native on a CPU (calls it cannot take fall
// back, logged); native off the CPU is a core::Error naming the key.
bool native_loss(const std::string& loss_kernel, const c10::Device& device,
                 int64_t tensor_parallel = 1, const std::string& precision = "fp32");
// The same optimizer with its state sharded over the data-parallel group `dp` (Megatron's
// --use-distributed-optimizer: train::ShardedAdamW); null or one rank: one shard holding all.
std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>
megatron_distributed_adam(AdamOptions options, std::shared_ptr<dist::TensorComm> dp);

}  // namespace scaffold::llm
