#include "workloads/llm_training/task.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include <cmath>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/cpu_kernel_key.hpp"
#include "kernels/fused_adam.hpp"
#include "nn/autocast.hpp"
#include "train/grad_clip.hpp"
#include "train/sharded_adam.hpp"

namespace scaffold::llm {

GptTask::GptTask(Gpt model, const data::ExampleSource& train_set,
                 const data::ExampleSource& val_set, c10::Device device, GptTaskOptions options)
    : model_(std::move(model)),
      train_set_(train_set),
      val_set_(val_set),
      device_(device),
      options_(std::move(options)) {
  const std::string& p = options_.precision;
  if (p != "fp32" && p != "bf16" && p != "fp16")
    throw core::Error(fmt::format("precision: '{}' is not one of fp32, bf16, fp16", p));
  if (options_.pipeline)
    SCAFFOLD_CHECK(options_.pipeline->stage.size == model_->stage().size &&
                       options_.pipeline->stage.rank == model_->stage().rank &&
                       options_.pipeline->stage.chunks == model_->stage().chunks,
                   "GptTask: the pipeline's stage is not the model's");
  if (p == "fp16" && !device_.is_cuda())
    throw core::Error(
        fmt::format("precision: fp16 needs a CUDA device (this run trains on {}); use fp32 or bf16",
                    device_.str()));
}

nn::AutocastState GptTask::autocast_state() const {
  nn::AutocastState a = nn::AutocastState::current().disabled();
  if (options_.precision == "bf16") {
    (device_.is_cuda() ? a.cuda_enabled : a.cpu_enabled) = true;
    (device_.is_cuda() ? a.cuda_dtype : a.cpu_dtype) = at::kBFloat16;
  } else if (options_.precision == "fp16") {
    a.cuda_enabled = true;
    a.cuda_dtype = at::kHalf;
  }
  return a;
}

at::Tensor GptTask::token_losses(const data::Batch& batch) {
  const at::Tensor& tokens = batch.fields.at(0);  // (B, S + 1)
  const int64_t s = tokens.size(1) - 1;
  nn::AutocastGuard amp(autocast_state());
  return model_->token_losses(tokens.narrow(1, 0, s), tokens.narrow(1, 1, s));
}

std::vector<int64_t> GptTask::activation_shape(const at::Tensor& tokens) const {
  const auto& tp = model_->tensor_parallel();
  const int64_t s = tokens.size(1) - 1;
  const bool split = model_->options().sequence_parallel && tp && tp->size > 1;
  return {tokens.size(0), split ? s / tp->size : s, model_->options().hidden_size};
}

namespace {

// Per-token losses (B, S) -> [sum x weight, count x weight] in float64: the metric sums.
at::Tensor loss_sums(const at::Tensor& losses, double weight) {
  const auto n = static_cast<double>(losses.numel());
  return at::stack({losses.detach().sum().to(at::kDouble) * weight,
                    at::scalar_tensor(n * weight, losses.options().dtype(at::kDouble))});
}

}  // namespace

at::Tensor GptTask::forward_backward(train::MicroBatchRun& run) {
  SCAFFOLD_CHECK(pipelined(), "GptTask::forward_backward: the model has one pipeline stage");
  const PipelineParallel& pp = *options_.pipeline;
  const PipelineStage& stage = pp.stage;
  const auto m = static_cast<int64_t>(run.batches.size());
  const int last_virtual = stage.virtual_stages() - 1;
  const std::vector<PipelineOp> ops =
      pipeline_ops(options_.schedule, stage.size, stage.rank, m, stage.chunks);
  std::size_t last_backward = 0;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (!ops[i].forward) last_backward = i;
  // What a (micro-batch, chunk)'s backward needs: its input from the previous virtual stage (for
  // the gradient to send back) and its output (the hidden states, or the loss on the last one).
  struct InFlight {
    at::Tensor input, output;
  };
  std::vector<InFlight> in_flight(static_cast<std::size_t>(m * stage.chunks));
  const at::TensorOptions activation_options =
      model_->parameters().front().options().requires_grad(false);
  at::Tensor sums = at::zeros({2}, activation_options.dtype(at::kDouble));
  StageLink link(pp);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const int64_t j = ops[i].micro_batch;
    const int k = ops[i].chunk, vs = stage.virtual_stage(k);
    const at::Tensor& tokens = run.batches[static_cast<std::size_t>(j)].fields.at(0);  // (B, S+1)
    const int64_t s = tokens.size(1) - 1;
    InFlight& f = in_flight[static_cast<std::size_t>(j * stage.chunks + k)];
    if (ops[i].forward) {
      SCAFFOLD_PROFILE_REGION(options_.profiler, "predict");
      if (vs == 0) {
        f.input = tokens.narrow(1, 0, s);
      } else {
        f.input = link.recv_forward(activation_shape(tokens), activation_options, j, k);
        f.input.requires_grad_(true);
      }
      nn::AutocastGuard amp(autocast_state());
      const at::Tensor hidden = model_->stage_forward(f.input, k);
      if (vs == last_virtual) {
        const at::Tensor losses = model_->losses_from_hidden(hidden, tokens.narrow(1, 1, s));
        f.output = losses.mean();
        sums += loss_sums(losses, stage.size);
      } else {
        link.send_forward(hidden.detach().to(activation_options.dtype()), j, k);
        f.output = hidden;
      }
    } else {
      SCAFFOLD_PROFILE_REGION(options_.profiler, "backward");
      if (i == last_backward && run.before_last_backward) run.before_last_backward();
      if (vs == last_virtual) {
        (f.output * run.loss_multiplier).backward();
      } else {
        const at::Tensor grad =
            link.recv_backward(f.output.sizes(), activation_options, j, k).to(f.output.dtype());
        f.output.backward(grad);
      }
      if (vs > 0) link.send_backward(f.input.grad(), j, k);
      f = InFlight{};  // its activations are freed as soon as they are used
    }
  }
  link.finish();
  return sums;
}

at::Tensor GptTask::pipeline_validation_sums(const data::Batch& batch) {
  const PipelineParallel& pp = *options_.pipeline;
  const PipelineStage& stage = pp.stage;
  const at::Tensor& tokens = batch.fields.at(0);
  const int64_t s = tokens.size(1) - 1;
  const at::TensorOptions activation_options = model_->parameters().front().options();
  StageLink link(pp, /*count_wait=*/false);
  nn::AutocastGuard amp(autocast_state());
  at::Tensor sums = at::zeros({2}, activation_options.dtype(at::kDouble));
  // The batch through every virtual stage in order: this rank's chunks one after another.
  for (int k = 0; k < stage.chunks; ++k) {
    const int vs = stage.virtual_stage(k);
    const at::Tensor input =
        vs == 0 ? tokens.narrow(1, 0, s)
                : link.recv_forward(activation_shape(tokens), activation_options, 0, k);
    const at::Tensor hidden = model_->stage_forward(input, k);
    if (vs == stage.virtual_stages() - 1)
      sums = loss_sums(model_->losses_from_hidden(hidden, tokens.narrow(1, 1, s)), stage.size);
    else
      link.send_forward(hidden.to(activation_options.dtype()), 0, k);
  }
  link.finish();
  return sums;
}

train::TrainForward GptTask::train_forward(const data::Batch& batch) {
  at::Tensor losses;
  {
    SCAFFOLD_PROFILE_REGION(options_.profiler, "predict");
    losses = token_losses(batch);
  }
  const at::Tensor loss = losses.mean();
  const auto n = static_cast<double>(losses.numel());
  return {loss, at::stack({loss.detach().to(at::kDouble) * n,
                           at::scalar_tensor(n, loss.options().dtype(at::kDouble))})};
}

at::Tensor GptTask::validation_sums(const data::Batch& batch) {
  if (pipelined()) return pipeline_validation_sums(batch);
  return loss_sums(token_losses(batch), 1.0);
}

void GptTask::after_step() {
  at::autocast::clear_cache();
}
void GptTask::after_validation() {
  at::autocast::clear_cache();
}

int GptTask::sum_multiplicity() const {
  const auto& tp = model_->tensor_parallel();
  return (tp ? tp->size : 1) * model_->stage().size;
}

void GptTask::reduce_embedding_gradients() {
  if (!pipelined()) return;
  const PipelineStage& stage = options_.pipeline->stage;
  if (!stage.first() && !stage.last()) return;
  at::Tensor grad = model_->word_embeddings.grad();
  SCAFFOLD_CHECK(grad.defined(), "pipeline: the tied embedding has no gradient");
  // Each copy's gradient goes to the other stage and both add the pair: a + b on one, b + a on
  // the other, the same floating-point sum.
  torch::NoGradGuard no_grad;
  const int peer = stage.first() ? stage.size - 1 : 0;
  const at::Tensor mine = grad.contiguous().clone();
  at::Tensor theirs = at::empty_like(mine);
  auto& group = *options_.pipeline->group;
  const core::Stopwatch clock;  // the first of the two to finish its backward waits here
  auto sent = group.send(mine, peer, 32700);
  group.recv(theirs, peer, 32700)->wait();
  sent->wait();
  add_pipeline_wait(clock.elapsed_s());
  grad.add_(theirs);
}

train::EpochMetrics GptTask::epoch_metrics(int64_t epoch, const train::PassSums& train,
                                           const train::PassSums& val) const {
  const double lm_loss = train.sums[0] / std::max(train.sums[1], 1.0);
  const double val_loss = val.sums[1] > 0 ? val.sums[0] / val.sums[1] : std::nan("");
  if (!std::isfinite(lm_loss))
    throw core::Error(
        fmt::format("training diverged in log interval {}: lm loss {} (lower lr, or use fp32/bf16)",
                    epoch, lm_loss));
  train::EpochMetrics m;
  m.values = {{"lm_loss", lm_loss}, {"val_loss", val_loss}};
  m.stop_value = -val_loss;
  m.val_loss = val_loss;
  return m;
}

namespace {

// A gradient's squared 2-norm, a float64 () tensor on its device: one pass of
// kernels::sum_of_squares for a dense float32 CPU gradient, the norm squared otherwise.
at::Tensor sum_of_squares(const at::Tensor& g) {
  if (g.device().is_cpu() && g.scalar_type() == at::kFloat && g.is_contiguous())
    return at::scalar_tensor(kernels::sum_of_squares(g.data_ptr<float>(), g.numel()),
                             at::TensorOptions().dtype(at::kDouble));
  return g.norm().to(at::kDouble).square();
}

}  // namespace

at::Tensor GptTask::clip_gradients(double max_norm, torch::optim::Optimizer* optimizer) {
  torch::NoGradGuard no_grad;
  const auto& tp = model_->tensor_parallel();
  const bool first_of_group = !tp || tp->rank == 0;
  // The last stage's copy of the tied embedding holds the first stage's gradient (after
  // reduce_embedding_gradients): counted there only.
  const bool tied_copy = model_->stage().size > 1 && model_->stage().last();
  std::vector<at::Tensor> grads, squares;
  for (const auto& named : model_->named_parameters()) {
    const at::Tensor& g = named.value().grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    if (tied_copy && named.key() == "word_embeddings") continue;
    // Replicated parameters hold the same gradient on every rank of the group: counted once.
    if (first_of_group || GptImpl::is_tensor_parallel(named.key()))
      squares.push_back(sum_of_squares(g));
  }
  if (grads.empty()) return at::zeros({1}, at::TensorOptions().dtype(at::kDouble));
  at::Tensor total = squares.empty() ? at::zeros({1}, grads[0].options().dtype(at::kDouble))
                                     : at::stack(squares).sum().reshape({1});
  if (options_.norm_group && options_.norm_group->size() > 1) {
    // With stages this is where an iteration's early finishers wait for the last backward: part
    // of the pipeline's idle time.
    const core::Stopwatch clock;
    options_.norm_group->allreduce_sum(total)->wait();
    if (pipelined()) add_pipeline_wait(clock.elapsed_s());
  } else if (tp && tp->size > 1)
    tp->group->allreduce_sum(total)->wait();
  // The norm and the scale stay on an accelerator (no host wait per step): torch's
  // clip_grad_norm_ arithmetic, coefficient max_norm / (norm + 1e-6) clamped to 1. On a CPU the
  // coefficient is read, and the gradients are left as they are when it is 1 (as Megatron's
  // clip_grad_norm_fp32 does): multiplying by 1 changes no bit, and would be a read and a write
  // of every gradient (about 1 GB a step for a 124M-parameter GPT).
  const at::Tensor norm = total.sqrt();
  if (max_norm > 0) {
    const at::Tensor coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);
    if (!coef.device().is_cpu() || coef.item<double>() < 1.0)
      train::scale_gradients(grads, coef, optimizer);
  }
  last_grad_norm_ = norm;
  return norm;
}

double GptTask::last_grad_norm() const {
  return last_grad_norm_.defined() ? last_grad_norm_.item<double>()
                                   : 0.0;  // read at log lines only
}

namespace {

// Megatron's two parameter groups: decay on matrices and embeddings, none on 1-D parameters.
std::vector<torch::optim::OptimizerParamGroup> megatron_groups(
    const AdamOptions& o, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> decay, no_decay;
  for (const at::Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const auto base = torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(base).weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(base).weight_decay(0.0)));
  return groups;
}

torch::optim::AdamWOptions megatron_defaults(const AdamOptions& o) {
  return torch::optim::AdamWOptions(o.lr)
      .betas({o.beta1, o.beta2})
      .eps(o.eps)
      .weight_decay(o.weight_decay);
}

}  // namespace

bool fused_optimizer(const std::string& optimizer_kernel, const c10::Device& device) {
  return kernels::cpu_kernel_chosen("optimizer_kernel", optimizer_kernel, "fused", device);
}

bool native_gelu(const std::string& gelu_kernel, const c10::Device& device) {
  return kernels::cpu_kernel_chosen("gelu_kernel", gelu_kernel, "native", device);
}

bool native_loss(const std::string& loss_kernel, const c10::Device& device, int64_t tensor_parallel,
                 const std::string& precision) {
  const bool chosen = kernels::cpu_kernel_chosen("loss_kernel", loss_kernel, "native", device);
  // auto: where the node takes every call (kernels::linear_cross_entropy_unsupported), so that
  // system.json names what runs.
  const bool takes_precision =
      precision == "fp32" || (precision == "bf16" && kernels::cpu_has_bf16_products());
  return chosen && (loss_kernel == "native" || (tensor_parallel == 1 && takes_precision));
}

kernels::GemmKernel gemm_kernel(const std::string& gemm_kernel, const c10::Device& device) {
  if (gemm_kernel == "libtorch" || (gemm_kernel == "auto" && !device.is_cpu()))
    return kernels::GemmKernel::LibTorch;
  if (!device.is_cpu())
    throw core::Error(
        fmt::format("gemm_kernel: {} runs on the CPU, this run trains on {}; use auto or libtorch",
                    gemm_kernel, device.str()));
  if (gemm_kernel != "onednn") return kernels::GemmKernel::Probe;  // auto, probe
  if (!kernels::dnnl_gemm_built())
    throw core::Error(
        "gemm_kernel: onednn, but this build has no oneDNN (install libdnnl-dev and rebuild)");
  return kernels::GemmKernel::OneDnn;
}

std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>
megatron_adam(AdamOptions o) {
  return [o](const std::vector<at::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
    if (o.fused)
      return std::make_unique<kernels::FusedAdamW>(megatron_groups(o, params),
                                                   megatron_defaults(o));
    return std::make_unique<torch::optim::AdamW>(megatron_groups(o, params), megatron_defaults(o));
  };
}

std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>
megatron_distributed_adam(AdamOptions o, std::shared_ptr<dist::TensorComm> dp) {
  return [o,
          dp](const std::vector<at::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<train::ShardedAdamW>(megatron_groups(o, params), megatron_defaults(o),
                                                 dp, train::ShardedAdamW::kGatherChunk, o.fused);
  };
}

}  // namespace scaffold::llm
