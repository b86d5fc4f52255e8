// `scaffold llm_training`: CARAML's GPT pre-training benchmark (docs/llm.md) as the hooks of the
// suite's driver (suite/driver.hpp): layout (tensor x pipeline x data) -> data (synthetic tokens
// or an indexed dataset) -> init_model (GPT, task, loop), then a matrix-multiply probe of the
// device's peak -> training (iterations through the shared loop: an "epoch" is one log interval;
// the first timing_warmup_iters are excluded by name) -> report (iteration_stats.csv,
// summary.json, Megatron's log lines). Ends at train_iters, at exit_duration_in_mins, or cleanly
// on the scheduler's warning signal (exit 3).
#include "workloads/llm_training/workload.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/dnnl_linear.hpp"
#include "nn/autocast.hpp"
#include "report/epoch_log.hpp"
#include "report/run_record.hpp"
#include "suite/driver.hpp"
#include "train/device.hpp"
#include "train/loop.hpp"
#include "train/sharded_adam.hpp"
#include "workloads/llm_training/data/gpt_sources.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/memory_estimate.hpp"
#include "workloads/llm_training/metrics.hpp"
#include "workloads/llm_training/options.hpp"
#include "workloads/llm_training/pipeline.hpp"
#include "workloads/llm_training/result_columns.hpp"
#include "workloads/llm_training/task.hpp"
#include "workloads/llm_training/tensor_parallel.hpp"

namespace scaffold::llm {
namespace {
namespace fs = std::filesystem;
using config::LlmTrainingConfig;

using Args = cli::WorkloadArgs;

// Megatron's layout: consecutive ranks form a tensor-parallel group, consecutive groups the
// stages of a pipeline, and the pipelines are data-parallel replicas:
// rank = (dp x P + pp) x t + tp. micro-batch x accumulation x DP = global batch.
struct Layout {
  int tp = 1, pp = 1, dp = 1;
  int chunks = 1;  // model chunks per pipeline rank (interleaved schedule)
  int64_t accumulation = 1;
  // The t x P ranks of one replica (its group) and the DP replicas (its peers), split once; the
  // tensor- and pipeline-parallel groups are split from the group.
  std::unique_ptr<dist::ParallelLayout> replicas;
  std::unique_ptr<dist::Communicator> tp_comm, pp_comm;
  std::shared_ptr<TensorParallel> tensor_parallel;
  std::shared_ptr<PipelineParallel> pipeline;
  std::shared_ptr<dist::TensorComm> model_parallel;  // the t x P ranks of one replica
};

Layout make_layout(dist::Communicator& comm, const LlmTrainingConfig& cfg,
                   const config::GptDims& dims, const c10::Device& device) {
  Layout l;
  dist::run_agreed(comm, [&] {
    const int64_t tp = cfg.tensor_model_parallel_size, pp = cfg.pipeline_model_parallel_size,
                  ranks = comm.size();
    if (ranks % (tp * pp) != 0)
      throw core::Error(fmt::format(
          "tensor_model_parallel_size {} x pipeline_model_parallel_size {} does not divide the {} "
          "ranks: ranks = tensor x pipeline x data-parallel size",
          tp, pp, ranks));
    const int64_t dp = ranks / (tp * pp);
    if (cfg.global_batch_size % (cfg.micro_batch_size * dp) != 0)
      throw core::Error(fmt::format(
          "global_batch_size {} is not a multiple of micro_batch_size {} x data-parallel "
          "size {} (= {} ranks / tensor_model_parallel_size {} / pipeline_model_parallel_size "
          "{}): the global batch is micro-batch x micro-batches per iteration x data-parallel "
          "size",
          cfg.global_batch_size, cfg.micro_batch_size, dp, ranks, tp, pp));
    if (dims.num_layers % pp != 0)
      throw core::Error(fmt::format(
          "pipeline_model_parallel_size {} must divide num_layers {} (each stage holds an equal "
          "run of layers)",
          pp, dims.num_layers));
    const int64_t per_chunk = cfg.num_layers_per_virtual_pipeline_stage;
    if (per_chunk > 0) {
      if (pp < 2)
        throw core::Error(
            "num_layers_per_virtual_pipeline_stage interleaves pipeline stages: it needs "
            "pipeline_model_parallel_size >= 2");
      if (dims.num_layers % (pp * per_chunk) != 0)
        throw core::Error(fmt::format(
            "num_layers_per_virtual_pipeline_stage {} x pipeline_model_parallel_size {} must "
            "divide num_layers {} (each rank holds num_layers / (P x this) model chunks)",
            per_chunk, pp, dims.num_layers));
      const int64_t micro_batches = cfg.global_batch_size / (cfg.micro_batch_size * dp);
      if (micro_batches % pp != 0)
        throw core::Error(fmt::format(
            "the interleaved pipeline schedule (num_layers_per_virtual_pipeline_stage {}) needs "
            "the micro-batches per iteration, global_batch_size {} / (micro_batch_size {} x "
            "data-parallel size {}) = {}, to be a multiple of pipeline_model_parallel_size {}",
            per_chunk, cfg.global_batch_size, cfg.micro_batch_size, dp, micro_batches, pp));
      l.chunks = static_cast<int>(dims.num_layers / (pp * per_chunk));
    }
    if (cfg.sequence_parallel && dims.seq_length % tp != 0)
      throw core::Error(fmt::format(
          "sequence_parallel: seq_length {} must be a multiple of tensor_model_parallel_size {} "
          "(each rank holds one block of the sequence)",
          dims.seq_length, tp));
    if (dims.num_attention_heads % tp != 0 || dims.ffn_hidden_size % tp != 0)
      throw core::Error(
          fmt::format("tensor_model_parallel_size {} must divide the attention heads ({}) and the "
                      "FFN hidden size ({})",
                      tp, dims.num_attention_heads, dims.ffn_hidden_size));
    l.tp = static_cast<int>(tp);
    l.pp = static_cast<int>(pp);
    l.dp = static_cast<int>(dp);
    l.accumulation = cfg.global_batch_size / (cfg.micro_batch_size * dp);
  });
  const int mp = l.tp * l.pp;
  l.replicas = std::make_unique<dist::ParallelLayout>(comm, mp);
  dist::Communicator& group = l.replicas->group();
  const int tp_rank = l.replicas->group_rank() % l.tp, pp_rank = l.replicas->group_rank() / l.tp;
  l.tp_comm = group.split(pp_rank, tp_rank);
  l.pp_comm = group.split(tp_rank, pp_rank);
  l.tensor_parallel = std::make_shared<TensorParallel>();
  l.tensor_parallel->size = l.tp;
  l.tensor_parallel->rank = tp_rank;
  if (l.tp > 1) l.tensor_parallel->group = dist::make_tensor_comm(*l.tp_comm, device);
  l.pipeline = std::make_shared<PipelineParallel>();
  l.pipeline->stage = {l.pp, pp_rank, l.chunks};
  if (l.pp > 1) l.pipeline->group = dist::make_tensor_comm(*l.pp_comm, device);
  if (mp > 1) l.model_parallel = dist::make_tensor_comm(group, device);
  return l;
}

struct Sources {
  std::unique_ptr<data::ExampleSource> train, val;
  std::string name;  // the Dataset column
};

// The data (data/gpt_sources.hpp): synthetic tokens cycled through synthetic_*_samples, or the
// splits of the indexed dataset at data_path with Megatron's sample counts, train_iters x global
// batch for training and (train_iters / eval_interval + 1) x eval_iters x global batch for
// validation (each pass reads its first eval_iters global batches).
Sources make_sources(const LlmTrainingConfig& cfg, const config::GptDims& dims) {
  GptDataOptions o;
  o.data_path = cfg.data_path;
  o.split = cfg.split;
  o.seq_length = dims.seq_length;
  o.seed = static_cast<uint64_t>(cfg.seed);
  o.vocab_size = cfg.vocab_size;
  if (cfg.data_path.empty()) {
    o.train_samples = cfg.synthetic_train_samples;
    o.valid_samples = cfg.synthetic_valid_samples;
  } else {
    const int64_t passes = cfg.eval_interval > 0 ? cfg.train_iters / cfg.eval_interval + 1 : 1;
    o.train_samples = cfg.train_iters * cfg.global_batch_size;
    o.valid_samples = passes * cfg.eval_iters * cfg.global_batch_size;
  }
  GptSources g = make_gpt_sources(o);
  LOG_INFO("data: {}", g.description);
  Sources s;
  s.train = std::move(g.train);
  s.val = std::move(g.valid);
  s.name = g.name;
  return s;
}

// The device's matrix-multiply rate in the run's precision: square n x n GEMMs, 2 untimed, the
// median of 5, 2 n^3 FLOPs each. TFLOP/s. n = 8192 on CUDA; 1024 on a CPU unless a 256 x 256
// product says that one of 1024 would take over kPeakProbeGemmS (LibTorch's bf16 reference loops
// on a CPU without AVX-512: 1-2 s each, minutes for a node of 64 ranks), then 512 or 256. With
// `gemm` other than LibTorch (a CPU run whose linear layers may take other kernels) the fastest of
// at::mm and those (oneDNN's sgemm, and our own with the probe, in float32; oneDNN's bf16 matmul of
// kernels/bf16_gemm.hpp in bf16 where the linear layers take it). A bf16 run whose products are
// float32 ones (kernels::bf16_linear_in_float32) is measured in float32, the rate its products can
// reach.
constexpr double kPeakProbeGemmS = 0.25;

struct PeakProbe {
  double tflops = 0.0;
  int64_t n = 0;               // the GEMMs' size
  std::string dtype = "fp32";  // what they multiplied: fp32, bf16 or fp16
};

PeakProbe measure_peak_tflops(const c10::Device& device, const std::string& precision,
                              kernels::GemmKernel gemm) {
  const bool onednn = gemm != kernels::GemmKernel::LibTorch;
  // A bf16 run whose products are float32 ones (kernels::bf16_linear) is measured against those.
  const at::ScalarType dtype = precision == "bf16" && !kernels::bf16_linear_in_float32(device, gemm)
                                   ? at::kBFloat16
                               : precision == "fp16" ? at::kHalf
                                                     : at::kFloat;
  torch::NoGradGuard no_grad;
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  int64_t n = device.is_cuda() ? 8192 : 1024;
  if (device.is_cpu()) {
    const at::Tensor a = at::randn({256, 256}, options), b = at::randn({256, 256}, options);
    at::mm(a, b);  // first call: the library's set-up, not the rate
    core::Stopwatch clock;
    at::mm(a, b);
    const double small_s = clock.elapsed_s();
    while (n > 256 && small_s * std::pow(static_cast<double>(n) / 256.0, 3) > kPeakProbeGemmS)
      n /= 2;
  }
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  // Seconds of product(): the median of 5 runs after 2.
  const auto median_s = [&](const auto& product) {
    std::vector<double> times;
    for (int i = 0; i < 7; ++i) {
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      core::Stopwatch clock;
      product();
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      if (i >= 2) times.push_back(clock.elapsed_s());
    }
    return core::median(times);
  };
  double best = median_s([&] { at::mm_out(c, a, b); });
  if (onednn && device.is_cpu() && dtype == at::kFloat && kernels::dnnl_linear_supported(a, b)) {
    // oneDNN's sgemm, and our own where the probe may choose it: a b^T, the same 2 n^3 FLOPs.
    std::vector<kernels::GemmChoice::Kernel> products{kernels::GemmChoice::OneDnn};
    if (gemm == kernels::GemmKernel::Probe) products.push_back(kernels::GemmChoice::Native);
    for (const auto kernel : products)
      best =
          std::min(best, median_s([&] {
                     kernels::chosen_linear(a, b, at::Tensor(), kernels::GemmChoice::all(kernel));
                   }));
  }
  if (dtype == at::kBFloat16 && kernels::bf16_linear_on_onednn(device, gemm)) {
    nn::AutocastState bf16 = nn::AutocastState::current();
    bf16.cpu_enabled = true;
    bf16.cpu_dtype = at::kBFloat16;
    const nn::AutocastGuard autocast(bf16);
    // a b^T on oneDNN's bf16 matmul
    best = std::min(best, median_s([&] { kernels::linear(a, b, at::Tensor(), gemm); }));
  }
  const double side = static_cast<double>(n);
  return {2.0 * side * side * side / best / 1e12, n,
          dtype == at::kBFloat16 ? "bf16"
          : dtype == at::kHalf   ? "fp16"
                                 : "fp32"};
}

std::string param_text(int64_t v) {
  return std::to_string(v);
}

LrSchedule schedule_of(const LlmTrainingConfig& c) {
  return {c.lr, c.min_lr, c.lr_warmup_samples, c.lr_decay_samples, c.lr_decay_style};
}

// A run of the benchmark: the driver (suite/driver.hpp) calls these hooks in order.
class LlmRun : public suite::WorkloadRun {
 public:
  explicit LlmRun(const LlmTrainingConfig& cfg) : cfg_(cfg), dims_(config::resolve_gpt_dims(cfg)) {}

  void layout(suite::RunEnv& env) override {
    if (cfg_.precision == "fp16" && !env.device.is_cuda())
      dist::run_agreed(env.comm, [&] {
        throw core::Error(fmt::format(
            "precision: fp16 needs a CUDA device (this run trains on {}); use bf16 or fp32",
            env.device.str()));
      });
    layout_ = make_layout(env.comm, cfg_, dims_, env.device);
  }
  core::MemoryEstimate memory_estimate(const suite::RunEnv& env) const override {
    LlmMemoryLayout memory;
    memory.tensor_parallel = layout_.tp;
    memory.pipeline_parallel = layout_.pp;
    memory.model_chunks = layout_.chunks;
    memory.data_parallel = layout_.dp;
    memory.micro_batches = layout_.accumulation;
    memory.attention_keeps_scores = attention_keeps_scores(attention_impl(env.device));
    return llm_memory_estimate(cfg_, memory);
  }

  void describe(suite::RunEnv& env, report::SystemInfo& info) override {
    device_name_ = info.gpu_model;
    // Refuses fused off the CPU here, before any data is made.
    const bool fused = fused_optimizer(cfg_.optimizer_kernel, env.device);
    info.kernels.push_back(std::string("optimizer=") + (fused ? "fused_adamw" : "libtorch"));
    info.kernels.push_back(std::string("gemm=") +
                           kernels::to_string(gemm_kernel(cfg_.gemm_kernel, env.device)));
    info.kernels.push_back(std::string("gelu=") +
                           (native_gelu(cfg_.gelu_kernel, env.device) ? "native" : "libtorch"));
    info.kernels.push_back(std::string("attention=") + to_string(attention_impl(env.device)));
    info.kernels.push_back(std::string("loss=") +
                           (native_loss(cfg_.loss_kernel, env.device, layout_.tp, cfg_.precision)
                                ? "native"
                                : "libtorch"));
  }

  // What rank 0's linear layers ran, counted call by call (the probes behind the choice are
  // kernels::probe_verdicts()'s lines, which the driver adds).
  void describe_after_training(report::SystemInfo& info) override {
    if (!mo_.kernel_use) return;
    info.kernels_run = mo_.kernel_use->summary();
    for (std::string& line : mo_.kernel_use->fallbacks())
      info.kernel_fallbacks.push_back(std::move(line));
  }

  void prepare_data(suite::RunEnv& env) override {
    dist::run_agreed(env.comm, [&] { sources_ = make_sources(cfg_, dims_); });
    LOG_INFO(
        "data: {} ({} training, {} validation sequences of {} tokens, vocabulary {}), global "
        "batch {} = micro-batch {} x {} {} x {} data-parallel",
        sources_.name, sources_.train->size(), sources_.val->size(), dims_.seq_length,
        cfg_.vocab_size, cfg_.global_batch_size, cfg_.micro_batch_size, layout_.accumulation,
        layout_.pp > 1 ? "micro-batches through the pipeline" : "accumulation", layout_.dp);
  }

  void build(suite::RunEnv& env) override {
    mo_.num_layers = dims_.num_layers;
    mo_.hidden_size = dims_.hidden_size;
    mo_.num_attention_heads = dims_.num_attention_heads;
    mo_.ffn_hidden_size = dims_.ffn_hidden_size;
    mo_.seq_length = dims_.seq_length;
    mo_.padded_vocab_size =
        padded_vocab_size(cfg_.vocab_size, cfg_.make_vocab_size_divisible_by, layout_.tp);
    mo_.position_embedding = parse_position_embedding(cfg_.position_embedding);
    mo_.init_method_std = cfg_.init_method_std;
    mo_.hidden_dropout = cfg_.hidden_dropout;
    mo_.attention_dropout = cfg_.attention_dropout;
    mo_.attention = attention_impl(env.device);
    mo_.recompute = parse_recompute(cfg_.recompute_granularity);
    mo_.sequence_parallel = cfg_.sequence_parallel && layout_.tp > 1;  // Megatron: off at TP 1
    mo_.gemm = gemm_kernel(cfg_.gemm_kernel, env.device);
    mo_.kernel_use = std::make_shared<kernels::KernelUse>();
    mo_.kernel_use->chose("gemm", mo_.gemm == kernels::GemmKernel::Probe
                                      ? std::vector<std::string>{"onednn", "libtorch", "native"}
                                      : std::vector<std::string>{kernels::to_string(mo_.gemm)});
    mo_.native_gelu = native_gelu(cfg_.gelu_kernel, env.device);
    mo_.kernel_use->chose("gelu", {mo_.native_gelu ? "native" : "libtorch"});
    mo_.native_loss = native_loss(cfg_.loss_kernel, env.device, layout_.tp, cfg_.precision);
    mo_.kernel_use->chose("loss", {mo_.native_loss ? "native" : "libtorch"});
    if (mo_.attention == AttentionImpl::kNative) mo_.kernel_use->chose("attention", {"native"});
    const int64_t log_interval = cfg_.log_interval;
    dist::run_agreed(env.comm, [&] {
      torch::manual_seed(static_cast<uint64_t>(cfg_.seed));  // the same master weights everywhere
      GptTaskOptions to;
      to.precision = cfg_.precision;
      to.profiler = &env.profiler;
      to.pipeline = layout_.pipeline;
      // With the distributed optimizer each DP rank holds its slice of the gradient only.
      to.norm_group =
          cfg_.use_distributed_optimizer && layout_.dp > 1
              ? std::shared_ptr<dist::TensorComm>(dist::make_tensor_comm(env.comm, env.device))
              : layout_.model_parallel;
      task_ = std::make_unique<GptTask>(Gpt(mo_, layout_.tensor_parallel, layout_.pipeline->stage),
                                        *sources_.train, *sources_.val, env.device, to);
    });
    train::LoopOptions lo;
    lo.local_batch_size = cfg_.micro_batch_size;
    lo.accumulation_steps = layout_.accumulation;
    lo.train_batches_per_epoch = log_interval;  // one "epoch" per log line
    lo.max_steps = cfg_.train_iters;
    lo.warmup_epochs = cfg_.timing_warmup_iters / log_interval;
    if (cfg_.exit_duration_in_mins > 0)
      lo.deadline_mono_s = env.start_mono_s + cfg_.exit_duration_in_mins * 60.0;
    lo.validation_every = cfg_.eval_interval / log_interval;
    lo.validation_batches = cfg_.eval_iters * layout_.accumulation;  // eval_iters global batches
    AdamOptions adam;
    adam.lr = cfg_.lr;
    adam.beta1 = cfg_.adam_beta1;
    adam.beta2 = cfg_.adam_beta2;
    adam.eps = cfg_.adam_eps;
    adam.weight_decay = cfg_.weight_decay;
    adam.fused = fused_optimizer(cfg_.optimizer_kernel, env.device);
    // One data-parallel communicator for the gradient all-reduce and the distributed optimizer's
    // gather (the same collectives in the same order on every rank).
    std::shared_ptr<dist::TensorComm> dp_tensor_comm;
    if (layout_.dp > 1)
      dp_tensor_comm = dist::make_tensor_comm(layout_.replicas->replica_peers(), env.device);
    lo.make_optimizer = cfg_.use_distributed_optimizer
                            ? megatron_distributed_adam(adam, dp_tensor_comm)
                            : megatron_adam(adam);
    const LrSchedule schedule = schedule_of(cfg_);
    const int64_t gbs = cfg_.global_batch_size;
    lo.lr_at_step = [schedule, gbs](int64_t step) { return megatron_lr(schedule, step * gbs); };
    lo.grad_clip_norm = cfg_.clip_grad;
    GptTask* t = task_.get();
    lo.clip_gradients = [t](double max_norm, torch::optim::Optimizer& optimizer) {
      t->clip_gradients(max_norm, &optimizer);
    };
    if (layout_.pp > 1)
      lo.forward_backward = [t](train::MicroBatchRun& run) { return t->forward_backward(run); };
    // After the data-parallel reduction: the model-parallel ones it does not do.
    if (mo_.sequence_parallel || layout_.pp > 1)
      lo.finish_gradients = [t] {
        t->reduce_sequence_parallel_gradients();
        t->reduce_embedding_gradients();
      };
    lo.checkpoint_interval = cfg_.save_interval > 0 ? cfg_.save_interval / log_interval : -1;
    lo.checkpoint_dir = env.run_dir / cfg_.checkpoint_dir;
    // Each rank's weights are its own slice or stage.
    lo.per_rank_checkpoints = layout_.tp > 1 || layout_.pp > 1;
    lo.seed = static_cast<uint64_t>(cfg_.seed);
    lo.loader_workers = cfg_.dataloader_num_workers;
    lo.loss_scaling = cfg_.precision == "fp16";  // bf16 is not scaled, as in Megatron
    lo.loss_scale_init = cfg_.initial_loss_scale;
    lo.loss_scale_min = cfg_.min_loss_scale;
    lo.loss_scale_growth_interval = cfg_.loss_scale_window;
    lo.loss_scale_hysteresis = cfg_.hysteresis;
    lo.loss_scale_resumed = true;  // Megatron saves and restores its grad scaler
    lo.profiler = &env.profiler;
    train::LoopParallelism lp;
    lp.world = dp_tensor_comm;
    if (layout_.tp * layout_.pp > 1) lp.replica_comm = &layout_.replicas->replica_peers();
    // The t x P ranks of a replica read the same samples.
    const dist::ProcessGrid grid(env.comm.size(), env.comm.rank(), {layout_.tp * layout_.pp, 1, 1},
                                 {2, 3, 4});
    dist::run_agreed(env.comm, [&] {
      loop_ = std::make_unique<train::TrainingLoop>(*task_, std::move(lo), env.device, env.comm,
                                                    grid, std::move(lp));
    });
    log_ = std::make_unique<report::EpochLog<IntervalRow>>(env.run_dir / kIterationStatsFileName,
                                                           iteration_stats_columns());
  }

  void after_build(suite::RunEnv& env) override {
    env.phases.run("peak_probe",
                   [&] { peak_ = measure_peak_tflops(env.device, cfg_.precision, mo_.gemm); });
    table_peak_ = table_peak_tflops(device_name_, cfg_.precision);
    flops_.global_batch = cfg_.global_batch_size;
    flops_.seq_length = dims_.seq_length;
    flops_.num_layers = dims_.num_layers;
    flops_.hidden_size = dims_.hidden_size;
    flops_.padded_vocab = mo_.padded_vocab_size;
    flops_.activation_factor = caraml_activation_factor(cfg_.recompute_granularity);
    params_ = gpt_parameter_count(mo_);
    LOG_INFO(
        "model: GPT {} ({} layers, hidden {}, {} heads, FFN {}, sequence {}, vocabulary {} "
        "padded to {}), {} parameters, {} positions, {} attention, recompute {}, {}, TP {} x PP "
        "{} x DP {} on {} with {} thread(s)",
        cfg_.model_size, dims_.num_layers, dims_.hidden_size, dims_.num_attention_heads,
        dims_.ffn_hidden_size, dims_.seq_length, cfg_.vocab_size, mo_.padded_vocab_size, params_,
        cfg_.position_embedding, to_string(mo_.attention), cfg_.recompute_granularity,
        cfg_.precision, layout_.tp, layout_.pp, layout_.dp, env.device.str(), env.threads);
    LOG_INFO(
        "peak: {:.3f} TFLOP/s per device measured ({} GEMM, n = {}){}; {:.4g} TFLOP per "
        "iteration (k = {})",
        peak_.tflops, peak_.dtype, peak_.n,
        table_peak_ ? fmt::format(", {:.0f} in the data sheet of {} ({:.0f}% of it)", *table_peak_,
                                  device_name_, 100.0 * peak_.tflops / *table_peak_)
                    : std::string(),
        gpt_iteration_flops(flops_) / 1e12, flops_.activation_factor);
  }

  train::TrainingLoop* loop() override { return loop_.get(); }

  void resume_rows(suite::RunEnv&, const train::TrainCounters& start) override {
    log_->resume([&](const IntervalRow& r) { return r.iteration <= start.total_optimizer_steps; });
  }

  void before_training(suite::RunEnv&) override {
    skipped_before_ = loop_->skipped_steps();
    tp_comm_before_ = tensor_parallel_stats().seconds;
    wait_mark_ = pipeline_stats().wait_s;
  }

  void on_epoch(suite::RunEnv& env, const train::LoopEpoch& e) override {
    IntervalRow r;
    r.iteration = e.total_optimizer_steps;
    r.iterations = e.optimizer_steps;
    r.warmup = e.warmup;
    r.train_s = e.train_s;
    r.lm_loss = e.metrics.values[0].second;
    r.val_loss = e.metrics.values[1].second;
    r.lr = megatron_lr(schedule_of(cfg_), r.iteration * cfg_.global_batch_size);
    r.grad_norm = task_->last_grad_norm();
    r.loss_scale = cfg_.precision == "fp16" ? loop_->loss_scale() : 1.0;
    r.skipped = loop_->skipped_steps() - skipped_before_;
    skipped_before_ = loop_->skipped_steps();
    if (!e.warmup) {
      timed_wait_s_ += pipeline_stats().wait_s - wait_mark_;
      timed_train_s_ += e.train_s;
    }
    wait_mark_ = pipeline_stats().wait_s;
    if (env.comm.rank() != 0) return;
    // Megatron's lines go to stdout, unprefixed, as Megatron prints them (CARAML's JUBE patterns
    // read them from the job's output file); docs/llm.md lists them.
    core::print_stdout_line(megatron_log_line(r, cfg_.train_iters, flops_, env.comm.size()));
    if (e.validated) {
      const std::string line = fmt::format(
          " validation loss at iteration {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} | ",
          r.iteration, r.val_loss, std::exp(std::min(r.val_loss, 20.0)));
      const std::string rule(line.size() + 1, '-');
      for (const std::string& l : {rule, line, rule}) core::print_stdout_line(l);
    }
    log_->append(r);
  }

  void after_training(suite::RunEnv& env, const train::LoopResult&) override {
    tp_comm_s_ = tensor_parallel_stats().seconds - tp_comm_before_;
    // Memory per rank, measured: the largest over the ranks of Adam's state bytes (sharded by the
    // distributed optimizer) and of the peak resident set (collective: every rank contributes).
    memory_max_[0] = static_cast<double>(train::adam_state_bytes(loop_->optimizer()));
    memory_max_[1] = static_cast<double>(core::peak_rss_bytes());
    env.comm.allreduce_max(memory_max_, 2);
    // Each pipeline stage's measured idle share of the timed training time (the mean over its
    // ranks), against the ideal bubble (P - 1) / (m + P - 1).
    const int ranks = env.comm.size();
    std::vector<double> idle_share(static_cast<std::size_t>(ranks), 0.0);
    idle_share[static_cast<std::size_t>(env.comm.rank())] =
        timed_train_s_ > 0 ? timed_wait_s_ / timed_train_s_ : 0.0;
    env.comm.allreduce_sum(idle_share.data(), idle_share.size());
    stage_idle_.assign(static_cast<std::size_t>(layout_.pp), 0.0);
    for (int r = 0; r < ranks; ++r)
      stage_idle_[static_cast<std::size_t>((r / layout_.tp) % layout_.pp)] +=
          idle_share[static_cast<std::size_t>(r)] / (ranks / layout_.pp);
  }

  bool finish(suite::RunEnv& env, const train::LoopResult& result,
              const suite::EnergyResult& energy, report::RunRecord& rec) override;

  std::string unit() const override { return "log interval"; }
  std::string reached(const train::LoopResult& result) const override {
    return fmt::format("iteration {}", result.total_optimizer_steps);
  }

 private:
  // The config's `attention` for a run on `device` (docs/llm.md, "Attention").
  AttentionImpl attention_impl(const c10::Device& device) const {
    return parse_attention(cfg_.attention, native_attention_unsupported(
                                               device, cfg_.attention_dropout,
                                               dims_.hidden_size / dims_.num_attention_heads));
  }
  LlmTrainingConfig cfg_;
  config::GptDims dims_;
  Layout layout_;
  Sources sources_;
  GptOptions mo_;
  std::string device_name_;
  std::unique_ptr<GptTask> task_;
  std::unique_ptr<train::TrainingLoop> loop_;
  std::unique_ptr<report::EpochLog<IntervalRow>> log_;
  PeakProbe peak_;
  std::optional<double> table_peak_;
  GptFlopsModel flops_;
  int64_t params_ = 0;
  int64_t skipped_before_ = 0;
  double tp_comm_before_ = 0.0, tp_comm_s_ = 0.0;
  // Pipeline receives' waits (the bubble plus transfers) and training time, timed intervals only.
  double wait_mark_ = 0.0, timed_wait_s_ = 0.0, timed_train_s_ = 0.0;
  double memory_max_[2] = {0.0, 0.0};
  std::vector<double> stage_idle_;
};

bool LlmRun::finish(suite::RunEnv& env, const train::LoopResult& result,
                    const suite::EnergyResult& energy, report::RunRecord& rec) {
  if (result.deadline_reached) {
    // Megatron's print_datetime line; our reason on stderr.
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
    core::print_stdout_line(fmt::format(
        "[exiting program after {} minutes] datetime: {} ",
        core::python_float_str((core::monotonic_s() - env.start_mono_s) / 60.0), stamp));
    LOG_INFO("exit_duration_in_mins {} reached: stopped after the iteration in flight",
             cfg_.exit_duration_in_mins);
  }
  const auto& rows = log_->rows();
  const int devices = env.comm.size();
  rec.global_batch = cfg_.global_batch_size;
  rec.local_batch = cfg_.micro_batch_size;
  rec.precision = cfg_.precision;
  rec.warmup_epochs = cfg_.timing_warmup_iters / cfg_.log_interval;
  const char* job_time = std::getenv("SCAFFOLD_JOB_TIME");
  rec.params = {{kParamModel, "GPT"},
                {kParamModelSize, cfg_.num_layers > 0 || cfg_.hidden_size > 0 ||
                                          cfg_.num_attention_heads > 0 ||
                                          cfg_.ffn_hidden_size > 0 || cfg_.seq_length > 0
                                      ? "custom"
                                      : cfg_.model_size},
                {kParamDataset, sources_.name},
                {kParamJobTime, job_time ? job_time : ""},
                {kParamPipelineParallel, param_text(layout_.pp)},
                {"pipeline_model_chunks", param_text(layout_.chunks)},
                {kParamTensorParallel, param_text(layout_.tp)},
                {"sequence_parallel", mo_.sequence_parallel ? "1" : "0"},
                {kParamDataParallel, param_text(layout_.dp)},
                {kParamRecompute, cfg_.recompute_granularity},
                {"num_layers", param_text(dims_.num_layers)},
                {"hidden_size", param_text(dims_.hidden_size)},
                {"num_attention_heads", param_text(dims_.num_attention_heads)},
                {"ffn_hidden_size", param_text(dims_.ffn_hidden_size)},
                {"seq_length", param_text(dims_.seq_length)},
                {"padded_vocab_size", param_text(mo_.padded_vocab_size)},
                {"position_embedding", cfg_.position_embedding},
                {"attention", to_string(mo_.attention)},
                {"accumulation_steps", param_text(layout_.accumulation)}};
  rec.counters = {
      {"parameters", static_cast<double>(params_), "", "trainable parameters of the whole model"},
      {"optimizer_state_bytes", memory_max_[0], "B",
       "Adam's exp_avg and exp_avg_sq on one rank (the largest; measured)"},
      {"peak_rss_gib", memory_max_[1] / (1 << 30), "GiB",
       "peak resident set of one process (the largest over the ranks)"},
      {"peak_tflops_per_device", peak_.tflops, "TFLOP/s",
       "measured: square GEMMs in the run's precision on one device"}};
  if (table_peak_)
    rec.counters.push_back(
        {"table_peak_tflops_per_device", *table_peak_, "TFLOP/s", "the device's data-sheet peak"});
  if (rows.empty()) return false;
  const std::optional<double> wh = energy.sum_wh({"train"});
  const LlmFigures f = llm_figures(rows, flops_, devices, peak_.tflops, wh);
  rec.epochs = static_cast<int64_t>(
      std::count_if(rows.begin(), rows.end(), [](const IntervalRow& r) { return !r.warmup; }));
  rec.time_s = f.timed_s;
  rec.energy_wh = wh;
  const double nan = std::nan("");
  rec.counters.insert(
      rec.counters.begin(),
      {{kCounterIterations, static_cast<double>(f.iterations), "", "the last iteration reached"},
       {kCounterTimePerIteration, f.caraml_time_per_iteration_s, "s",
        "CARAML's Time/iteration: mean of the log lines' elapsed time per iteration, warm-up "
        "included"},
       {kCounterTokensPerS, f.caraml_tokens_per_s, "tokens/s",
        "CARAML's Tokens/second: B s / that mean"},
       {kCounterTflopsPerDevice, f.caraml_tflops_per_device, "TFLOP/s",
        "CARAML's Avg_TFLOPs/GPU: mean of the log lines' TFLOPs (k = 4 with recompute)"},
       {kCounterSteadyTimePerIteration, f.timed_iterations > 0 ? f.time_per_iteration_s : nan, "s",
        "timed window (timing_warmup_iters excluded): training time / iterations"},
       {kCounterSteadyTokensPerS, f.timed_iterations > 0 ? f.tokens_per_s : nan, "tokens/s",
        "timed window: B s / steady time per iteration"},
       {kCounterSteadyTflopsPerDevice, f.timed_iterations > 0 ? f.tflops_per_device : nan,
        "TFLOP/s", "timed window, CARAML's formula"},
       {"model_tflops_per_device", f.timed_iterations > 0 ? f.model_tflops_per_device : nan,
        "TFLOP/s", "timed window, k = 3 (recomputation not counted)"},
       {kCounterMfu, f.mfu.value_or(nan), "",
        "model TFLOP/s per device / measured peak (fraction)"},
       {"lm_loss", f.lm_loss, "", "training loss of the last log interval"},
       {"val_loss", f.val_loss.value_or(nan), "", "the last validation loss"}});
  if (f.tokens_per_wh) {
    rec.counters.push_back(
        {kCounterTokensPerWh, *f.tokens_per_wh, "tokens/Wh", "timed tokens / timed energy"});
    rec.counters.push_back(
        {kCounterJPerToken, *f.j_per_token, "J/token", "timed energy / timed tokens"});
  }
  rec.counters.push_back({"median_iteration_s", core::median(result.step_times_s), "s",
                          "median timed iteration on rank 0"});
  rec.counters.push_back(
      {"gradient_wait_s", loop_->comm_times().gradient_wait_s, "s",
       "rank 0's wait for the data-parallel all-reduce after backward (the distributed "
       "optimizer's reduce-scatter), timed iterations"});
  rec.counters.push_back({"tensor_parallel_comm_s", tp_comm_s_, "s",
                          "rank 0's time in tensor-parallel collectives, all iterations"});
  rec.counters.push_back({"skipped_steps", static_cast<double>(result.skipped_steps), "",
                          "iterations the fp16 loss scaler skipped"});
  if (layout_.pp > 1) {
    const double ideal_bubble =
        pipeline_bubble_fraction(layout_.pp, layout_.accumulation, layout_.chunks);
    rec.counters.push_back({"pipeline_bubble_ideal", ideal_bubble, "",
                            "(P - 1) / (v m + P - 1): each stage's idle share with equal "
                            "stages and free transfers (v model chunks per rank)"});
    for (int p = 0; p < layout_.pp; ++p)
      rec.counters.push_back({fmt::format("pipeline_idle_share_stage{}", p),
                              stage_idle_[static_cast<std::size_t>(p)], "",
                              "measured: the stage's wait in pipeline receives / its timed "
                              "training time (mean over its ranks)"});
    LOG_INFO(
        "pipeline: {} stages of {} model chunk(s), {} micro-batches per iteration, {}{}; idle "
        "share per stage (waiting in receives, timed iterations) {:.3f} against the ideal "
        "bubble {:.3f}",
        layout_.pp, layout_.chunks, layout_.accumulation,
        to_string(PipelineSchedule::kOneForwardOneBackward),
        layout_.chunks > 1 ? " interleaved" : "", fmt::join(stage_idle_, " "), ideal_bubble);
  }
  LOG_INFO(
      "llm_training: {} iterations; CARAML: {:.4f} s/iteration, {:.1f} tokens/s, {:.3f} TFLOP/s "
      "per device (every log line); steady ({} iterations after {} warm-up): {:.4f} "
      "s/iteration, {:.1f} tokens/s, {:.3f} TFLOP/s per device, MFU {}",
      f.iterations, f.caraml_time_per_iteration_s, f.caraml_tokens_per_s,
      f.caraml_tflops_per_device, f.timed_iterations, cfg_.timing_warmup_iters,
      f.time_per_iteration_s, f.tokens_per_s, f.tflops_per_device,
      f.mfu ? fmt::format("{:.2f}%", 100 * *f.mfu) : std::string("-"));
  if (f.tokens_per_wh)
    LOG_INFO("energy of the timed iterations: {:.4g} Wh, {:.4g} tokens/Wh, {:.4g} J/token", *wh,
             *f.tokens_per_wh, *f.j_per_token);
  return true;
}

std::unique_ptr<suite::WorkloadRun> start(const LlmTrainingConfig& cfg, const Args&) {
  return std::make_unique<LlmRun>(cfg);
}

}  // namespace

suite::Workload llm_training_workload() {
  return suite::make_workload<LlmTrainingConfig>(
      kWorkloadName,
      "CARAML's LLM benchmark: GPT pre-training (Megatron-style tensor, pipeline and data "
      "parallelism), tokens/s, TFLOP/s, MFU and energy",
      start, result_table());
}

}  // namespace scaffold::llm
