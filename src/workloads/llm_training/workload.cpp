// `scaffold llm_training`: CARAML's GPT pre-training benchmark (docs/llm.md) as a
// phase-structured driver: init (config, tensor x pipeline x data layout, run folder, context)
// -> data (synthetic tokens or an indexed dataset) -> init_model (GPT, task, loop, a
// matrix-multiply probe of the device's peak) -> training (iterations through the shared loop:
// an "epoch" is one log interval; the first timing_warmup_iters are excluded by name) -> report
// (iteration_stats.csv, summary.json, Megatron's log lines). Ends at train_iters, at
// exit_duration_in_mins, or cleanly on the scheduler's warning signal (exit 3).
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

#include "cli/energy_meter.hpp"
#include "config/llm_training_options.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyfloat.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "profile/options.hpp"
#include "profile/profiler.hpp"
#include "report/run_record.hpp"
#include "suite/phases.hpp"
#include "suite/record.hpp"
#include "suite/run_folder.hpp"
#include "suite/stop_signals.hpp"
#include "train/device.hpp"
#include "train/device_memory.hpp"
#include "train/loop.hpp"
#include "train/sharded_adam.hpp"
#include "workloads/llm_training/data/gpt_sources.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/memory_estimate.hpp"
#include "workloads/llm_training/metrics.hpp"
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
  std::unique_ptr<dist::Communicator> tp_comm, pp_comm, dp_comm, mp_comm;
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
  const int rank = comm.rank(), mp = l.tp * l.pp;
  const int tp_rank = rank % l.tp, pp_rank = (rank / l.tp) % l.pp, dp_rank = rank / mp;
  l.tp_comm = comm.split(rank / l.tp, tp_rank);
  l.pp_comm = comm.split(dp_rank * l.tp + tp_rank, pp_rank);
  l.dp_comm = comm.split(rank % mp, dp_rank);
  l.mp_comm = comm.split(dp_rank, rank % mp);
  l.tensor_parallel = std::make_shared<TensorParallel>();
  l.tensor_parallel->size = l.tp;
  l.tensor_parallel->rank = tp_rank;
  if (l.tp > 1) l.tensor_parallel->group = dist::make_tensor_comm(*l.tp_comm, device);
  l.pipeline = std::make_shared<PipelineParallel>();
  l.pipeline->stage = {l.pp, pp_rank, l.chunks};
  if (l.pp > 1) l.pipeline->group = dist::make_tensor_comm(*l.pp_comm, device);
  if (mp > 1) l.model_parallel = dist::make_tensor_comm(*l.mp_comm, device);
  return l;
}

struct Sources {
  std::unique_ptr<dataset::ExampleSource> train, val;
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

// The device's matrix-multiply rate in the run's precision: square n x n GEMMs (n = 8192 on
// CUDA, 1024 on a CPU), 2 untimed, the median of 5, 2 n^3 FLOPs each. TFLOP/s.
double measure_peak_tflops(const c10::Device& device, const std::string& precision) {
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const at::ScalarType dtype = precision == "bf16"   ? at::kBFloat16
                               : precision == "fp16" ? at::kHalf
                                                     : at::kFloat;
  torch::NoGradGuard no_grad;
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    core::Stopwatch clock;
    at::mm_out(c, a, b);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    if (i >= 2) times.push_back(clock.elapsed_s());
  }
  return 2.0 * static_cast<double>(n * n * n) / core::median(times) / 1e12;
}

std::string param_text(int64_t v) {
  return std::to_string(v);
}

LrSchedule schedule_of(const LlmTrainingConfig& c) {
  return {c.lr, c.min_lr, c.lr_warmup_samples, c.lr_decay_samples, c.lr_decay_style};
}

int run(cli::RunContext& ctx, const Args& args) {
  const double start_mono_s = core::monotonic_s();
  at::set_num_threads(ctx.threads);
  const profile::ProfileOptions profile_options = profile::profile_options_from_env();
  profile::Profiler profiler(profile::profiles_this_rank(profile_options, ctx.comm.local_rank()),
                             profile_options.schedule);
  suite::PhaseDriver phases(&profiler);
  suite::install_stop_signals(ctx.stop_signals);

  // init: config, layout, run folder, context.
  const LlmTrainingConfig cfg =
      cli::load_config_everywhere_as<LlmTrainingConfig>(ctx.comm, args.config);
  const config::GptDims dims = config::resolve_gpt_dims(cfg);
  const train::DeviceChoice device_choice =
      train::select_device(cfg.device, cfg.device_sharing, ctx.comm);
  const c10::Device device = device_choice.device;
  if (cfg.precision == "fp16" && !device.is_cuda())
    dist::run_agreed(ctx.comm, [&] {
      throw core::Error(fmt::format(
          "precision: fp16 needs a CUDA device (this run trains on {}); use bf16 or fp32",
          device.str()));
    });
  Layout layout = make_layout(ctx.comm, cfg, dims, device);
  dist::run_agreed(ctx.comm, [&] {
    LlmMemoryLayout memory;
    memory.tensor_parallel = layout.tp;
    memory.pipeline_parallel = layout.pp;
    memory.model_chunks = layout.chunks;
    memory.data_parallel = layout.dp;
    memory.micro_batches = layout.accumulation;
    memory.attention_keeps_scores = attention_keeps_scores(parse_attention(cfg.attention));
    train::check_memory_budget_on(kWorkloadName, llm_memory_estimate(cfg, memory), device,
                                  ctx.comm.local_size(), cfg.device_sharing);
  });
  const fs::path run_dir = suite::prepare_run_folder(
      ctx.comm, suite::run_folder_request(cfg, args.config.files, args.config.given_flags(),
                                          args.run_dir, args.argv));
  std::optional<suite::SetupGuard> setup_guard(std::in_place, ctx.comm, run_dir,
                                               !args.run_dir.empty());
  LOG_INFO("llm_training: run folder {}", run_dir.string());
  const std::string device_name = train::device_model_name(device);
  {
    report::SystemInfo info;
    info.gpu_model = device_name;
    info.device = device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx.threads;
    suite::write_run_context(ctx.comm, run_dir, info);
  }

  // data
  Sources sources;
  phases.run("data",
             [&] { dist::run_agreed(ctx.comm, [&] { sources = make_sources(cfg, dims); }); });
  LOG_INFO(
      "data: {} ({} training, {} validation sequences of {} tokens, vocabulary {}), global batch "
      "{} = "
      "micro-batch {} x {} {} x {} data-parallel",
      sources.name, sources.train->size(), sources.val->size(), dims.seq_length, cfg.vocab_size,
      cfg.global_batch_size, cfg.micro_batch_size, layout.accumulation,
      layout.pp > 1 ? "micro-batches through the pipeline" : "accumulation", layout.dp);

  // model
  GptOptions mo;
  mo.num_layers = dims.num_layers;
  mo.hidden_size = dims.hidden_size;
  mo.num_attention_heads = dims.num_attention_heads;
  mo.ffn_hidden_size = dims.ffn_hidden_size;
  mo.seq_length = dims.seq_length;
  mo.padded_vocab_size =
      padded_vocab_size(cfg.vocab_size, cfg.make_vocab_size_divisible_by, layout.tp);
  mo.position_embedding = parse_position_embedding(cfg.position_embedding);
  mo.init_method_std = cfg.init_method_std;
  mo.hidden_dropout = cfg.hidden_dropout;
  mo.attention_dropout = cfg.attention_dropout;
  mo.attention = parse_attention(cfg.attention);
  mo.recompute = parse_recompute(cfg.recompute_granularity);
  mo.sequence_parallel = cfg.sequence_parallel && layout.tp > 1;  // Megatron: off at TP 1
  std::unique_ptr<GptTask> task;
  std::unique_ptr<train::TrainingLoop> loop;
  const int64_t log_interval = cfg.log_interval;
  phases.run("init_model", [&] {
    dist::run_agreed(ctx.comm, [&] {
      torch::manual_seed(static_cast<uint64_t>(cfg.seed));  // the same master weights on every rank
      GptTaskOptions to;
      to.precision = cfg.precision;
      to.profiler = &profiler;
      to.pipeline = layout.pipeline;
      // With the distributed optimizer each DP rank holds its slice of the gradient only.
      to.norm_group =
          cfg.use_distributed_optimizer && layout.dp > 1
              ? std::shared_ptr<dist::TensorComm>(dist::make_tensor_comm(ctx.comm, device))
              : layout.model_parallel;
      task = std::make_unique<GptTask>(Gpt(mo, layout.tensor_parallel, layout.pipeline->stage),
                                       *sources.train, *sources.val, device, to);
    });
    train::LoopOptions lo;
    lo.local_batch_size = cfg.micro_batch_size;
    lo.accumulation_steps = layout.accumulation;
    lo.train_batches_per_epoch = log_interval;  // one "epoch" per log line
    lo.max_steps = cfg.train_iters;
    lo.warmup_epochs = cfg.timing_warmup_iters / log_interval;
    if (cfg.exit_duration_in_mins > 0)
      lo.deadline_mono_s = start_mono_s + cfg.exit_duration_in_mins * 60.0;
    lo.validation_every = cfg.eval_interval / log_interval;
    lo.validation_batches = cfg.eval_iters * layout.accumulation;  // eval_iters global batches
    AdamOptions adam;
    adam.lr = cfg.lr;
    adam.beta1 = cfg.adam_beta1;
    adam.beta2 = cfg.adam_beta2;
    adam.eps = cfg.adam_eps;
    adam.weight_decay = cfg.weight_decay;
    // One data-parallel communicator for the gradient all-reduce and the distributed optimizer's
    // gather (the same collectives in the same order on every rank).
    std::shared_ptr<dist::TensorComm> dp_tensor_comm;
    if (layout.dp > 1) dp_tensor_comm = dist::make_tensor_comm(*layout.dp_comm, device);
    lo.make_optimizer = cfg.use_distributed_optimizer
                            ? megatron_distributed_adam(adam, dp_tensor_comm)
                            : megatron_adam(adam);
    const LrSchedule schedule = schedule_of(cfg);
    const int64_t gbs = cfg.global_batch_size;
    lo.lr_at_step = [schedule, gbs](int64_t step) { return megatron_lr(schedule, step * gbs); };
    lo.grad_clip_norm = cfg.clip_grad;
    GptTask* t = task.get();
    lo.clip_gradients = [t](double max_norm) { t->clip_gradients(max_norm); };
    if (layout.pp > 1)
      lo.forward_backward = [t](train::MicroBatchRun& run) { return t->forward_backward(run); };
    // After the data-parallel reduction: the model-parallel ones it does not do.
    if (mo.sequence_parallel || layout.pp > 1)
      lo.finish_gradients = [t] {
        t->reduce_sequence_parallel_gradients();
        t->reduce_embedding_gradients();
      };
    lo.checkpoint_interval = cfg.save_interval > 0 ? cfg.save_interval / log_interval : -1;
    lo.checkpoint_dir = run_dir / cfg.checkpoint_dir;
    // Each rank's weights are its own slice or stage.
    lo.per_rank_checkpoints = layout.tp > 1 || layout.pp > 1;
    lo.seed = static_cast<uint64_t>(cfg.seed);
    lo.loader_workers = cfg.dataloader_num_workers;
    lo.loss_scaling = cfg.precision == "fp16";  // bf16 is not scaled, as in Megatron
    lo.loss_scale_init = cfg.initial_loss_scale;
    lo.loss_scale_min = cfg.min_loss_scale;
    lo.loss_scale_growth_interval = cfg.loss_scale_window;
    lo.loss_scale_hysteresis = cfg.hysteresis;
    lo.loss_scale_resumed = true;  // Megatron saves and restores its grad scaler
    lo.profiler = &profiler;
    train::LoopParallelism lp;
    lp.world = dp_tensor_comm;
    if (layout.tp * layout.pp > 1) lp.replica_comm = layout.dp_comm.get();
    // The t x P ranks of a replica read the same samples.
    const dist::ProcessGrid grid(ctx.comm.size(), ctx.comm.rank(), {layout.tp * layout.pp, 1, 1},
                                 {2, 3, 4});
    dist::run_agreed(ctx.comm, [&] {
      loop = std::make_unique<train::TrainingLoop>(*task, std::move(lo), device, ctx.comm, grid,
                                                   std::move(lp));
    });
  });
  double peak_tflops = 0.0;
  phases.run("peak_probe", [&] { peak_tflops = measure_peak_tflops(device, cfg.precision); });
  const std::optional<double> table_peak = table_peak_tflops(device_name, cfg.precision);
  GptFlopsModel flops;
  flops.global_batch = cfg.global_batch_size;
  flops.seq_length = dims.seq_length;
  flops.num_layers = dims.num_layers;
  flops.hidden_size = dims.hidden_size;
  flops.padded_vocab = mo.padded_vocab_size;
  flops.activation_factor = caraml_activation_factor(cfg.recompute_granularity);
  const int devices = ctx.comm.size();
  const int64_t params = gpt_parameter_count(mo);
  LOG_INFO(
      "model: GPT {} ({} layers, hidden {}, {} heads, FFN {}, sequence {}, vocabulary {} padded to "
      "{}), {} "
      "parameters, {} positions, {} attention, recompute {}, {}, TP {} x PP {} x DP {} on {} "
      "with {} thread(s)",
      cfg.model_size, dims.num_layers, dims.hidden_size, dims.num_attention_heads,
      dims.ffn_hidden_size, dims.seq_length, cfg.vocab_size, mo.padded_vocab_size, params,
      cfg.position_embedding, to_string(mo.attention), cfg.recompute_granularity, cfg.precision,
      layout.tp, layout.pp, layout.dp, device.str(), ctx.threads);
  LOG_INFO(
      "peak: {:.3f} TFLOP/s per device measured ({} GEMM){}; {:.4g} TFLOP per iteration (k = {})",
      peak_tflops, cfg.precision,
      table_peak ? fmt::format(", {:.0f} in the data sheet of {} ({:.0f}% of it)", *table_peak,
                               device_name, 100.0 * peak_tflops / *table_peak)
                 : std::string(),
      gpt_iteration_flops(flops) / 1e12, flops.activation_factor);

  std::unique_ptr<core::Watchdog> watchdog =
      suite::progress_watchdog(ctx.comm, cfg.progress_timeout_s);
  loop->set_watchdog(&*watchdog);
  cli::EnergyMeter energy(ctx.comm);
  phases.set_energy_meter(&energy);

  train::TrainCounters start;
  if (!args.run_dir.empty()) start = loop->resume(run_dir / cfg.checkpoint_dir);
  std::vector<IntervalRow> rows;
  const fs::path stats_file = run_dir / kIterationStatsFileName;
  if (ctx.comm.rank() == 0 && !args.run_dir.empty() && fs::exists(stats_file))
    for (const IntervalRow& r : read_iteration_stats(stats_file))
      if (r.iteration <= start.total_optimizer_steps) rows.push_back(r);
  const auto write_rows = [&] {
    std::string text = iteration_stats_header() + "\n";
    for (const IntervalRow& r : rows) text += iteration_stats_line(r) + "\n";
    core::write_file_atomic(stats_file, text);
  };

  int64_t skipped_before = loop->skipped_steps();
  const double tp_comm_before = tensor_parallel_stats().seconds;
  // Pipeline receives' waits (the bubble plus transfers) and training time, timed intervals only.
  double wait_mark = pipeline_stats().wait_s, timed_wait_s = 0.0, timed_train_s = 0.0;
  setup_guard.reset();  // training starts: the folder stays whatever happens now
  const train::LoopResult result = phases.run("training", [&] {
    return loop->run([&](const train::LoopEpoch& e) {
      IntervalRow r;
      r.iteration = e.total_optimizer_steps;
      r.iterations = e.optimizer_steps;
      r.warmup = e.warmup;
      r.train_s = e.train_s;
      r.lm_loss = e.metrics.values[0].second;
      r.val_loss = e.metrics.values[1].second;
      r.lr = megatron_lr(schedule_of(cfg), r.iteration * cfg.global_batch_size);
      r.grad_norm = task->last_grad_norm();
      r.loss_scale = cfg.precision == "fp16" ? loop->loss_scale() : 1.0;
      r.skipped = loop->skipped_steps() - skipped_before;
      skipped_before = loop->skipped_steps();
      if (!e.warmup) {
        timed_wait_s += pipeline_stats().wait_s - wait_mark;
        timed_train_s += e.train_s;
      }
      wait_mark = pipeline_stats().wait_s;
      // Megatron's lines go to stdout, unprefixed, as Megatron prints them (CARAML's JUBE patterns
      // read them from the job's output file); docs/llm.md lists them.
      if (ctx.comm.rank() == 0) {
        core::print_stdout_line(megatron_log_line(r, cfg.train_iters, flops, devices));
        if (e.validated) {
          const std::string line = fmt::format(
              " validation loss at iteration {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} | ",
              r.iteration, r.val_loss, std::exp(std::min(r.val_loss, 20.0)));
          const std::string rule(line.size() + 1, '-');
          for (const std::string& l : {rule, line, rule}) core::print_stdout_line(l);
        }
      }
      energy.add_window(e.warmup ? "warmup" : "train", e.epoch, e.start_mono_s,
                        e.validation_start_mono_s);
      if (e.validated)
        energy.add_window("validation", e.epoch, e.validation_start_mono_s, e.end_mono_s);
      if (ctx.comm.rank() != 0) return;
      rows.push_back(r);
      write_rows();
    });
  });
  const double tp_comm_s = tensor_parallel_stats().seconds - tp_comm_before;
  // Memory per rank, measured: the largest over the ranks of Adam's state bytes (sharded by the
  // distributed optimizer) and of the peak resident set (collective: every rank contributes).
  double memory_max[2] = {static_cast<double>(train::adam_state_bytes(loop->optimizer())),
                          static_cast<double>(core::peak_rss_bytes())};
  ctx.comm.allreduce_max(memory_max, 2);
  // Each pipeline stage's measured idle share of the timed training time (the mean over its
  // ranks), against the ideal bubble (P - 1) / (m + P - 1).
  std::vector<double> idle_share(static_cast<std::size_t>(ctx.comm.size()), 0.0);
  idle_share[static_cast<std::size_t>(ctx.comm.rank())] =
      timed_train_s > 0 ? timed_wait_s / timed_train_s : 0.0;
  ctx.comm.allreduce_sum(idle_share.data(), idle_share.size());
  std::vector<double> stage_idle(static_cast<std::size_t>(layout.pp), 0.0);
  for (int r = 0; r < ctx.comm.size(); ++r)
    stage_idle[static_cast<std::size_t>((r / layout.tp) % layout.pp)] +=
        idle_share[static_cast<std::size_t>(r)] / (ctx.comm.size() / layout.pp);
  const double ideal_bubble =
      pipeline_bubble_fraction(layout.pp, layout.accumulation, layout.chunks);
  loop->set_watchdog(nullptr);
  watchdog.reset();
  phases.set_energy_meter(nullptr);
  const auto energy_rows = energy.finish(run_dir, start.epoch + 1);
  profiler.finish();
  if (result.deadline_reached && ctx.comm.rank() == 0) {
    // Megatron's print_datetime line; our reason on stderr.
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
    core::print_stdout_line(
        fmt::format("[exiting program after {} minutes] datetime: {} ",
                    core::python_float_str((core::monotonic_s() - start_mono_s) / 60.0), stamp));
    LOG_INFO("exit_duration_in_mins {} reached: stopped after the iteration in flight",
             cfg.exit_duration_in_mins);
  }

  if (ctx.comm.rank() == 0) {
    report::RunRecord rec =
        suite::base_record(kWorkloadName, run_dir, ctx.comm, ctx.threads, device.str());
    rec.status = result.stopped ? report::kStatusTimeLimit : report::kStatusCompleted;
    rec.global_batch = cfg.global_batch_size;
    rec.local_batch = cfg.micro_batch_size;
    rec.precision = cfg.precision;
    rec.warmup_epochs = cfg.timing_warmup_iters / log_interval;
    for (const auto& p : phases.phases()) rec.runtime_s += p.seconds;
    const char* job_time = std::getenv("SCAFFOLD_JOB_TIME");
    rec.params = {{kParamModel, "GPT"},
                  {kParamModelSize, cfg.num_layers > 0 || cfg.hidden_size > 0 ||
                                            cfg.num_attention_heads > 0 ||
                                            cfg.ffn_hidden_size > 0 || cfg.seq_length > 0
                                        ? "custom"
                                        : cfg.model_size},
                  {kParamDataset, sources.name},
                  {kParamJobTime, job_time ? job_time : ""},
                  {kParamPipelineParallel, param_text(layout.pp)},
                  {"pipeline_model_chunks", param_text(layout.chunks)},
                  {kParamTensorParallel, param_text(layout.tp)},
                  {"sequence_parallel", mo.sequence_parallel ? "1" : "0"},
                  {kParamDataParallel, param_text(layout.dp)},
                  {kParamRecompute, cfg.recompute_granularity},
                  {"num_layers", param_text(dims.num_layers)},
                  {"hidden_size", param_text(dims.hidden_size)},
                  {"num_attention_heads", param_text(dims.num_attention_heads)},
                  {"ffn_hidden_size", param_text(dims.ffn_hidden_size)},
                  {"seq_length", param_text(dims.seq_length)},
                  {"padded_vocab_size", param_text(mo.padded_vocab_size)},
                  {"position_embedding", cfg.position_embedding},
                  {"attention", to_string(mo.attention)},
                  {"accumulation_steps", param_text(layout.accumulation)}};
    rec.counters = {
        {"parameters", static_cast<double>(params), "", "trainable parameters of the whole model"},
        {"optimizer_state_bytes", memory_max[0], "B",
         "Adam's exp_avg and exp_avg_sq on one rank (the largest; measured)"},
        {"peak_rss_gib", memory_max[1] / (1 << 30), "GiB",
         "peak resident set of one process (the largest over the ranks)"},
        {"peak_tflops_per_device", peak_tflops, "TFLOP/s",
         "measured: square GEMMs in the run's precision on one device"}};
    if (table_peak)
      rec.counters.push_back(
          {"table_peak_tflops_per_device", *table_peak, "TFLOP/s", "the device's data-sheet peak"});
    if (!rows.empty()) {
      std::optional<double> wh;
      if (energy.active()) {
        double sum = 0.0;
        for (const auto& w : energy_rows)
          if (w.window == "train") sum += w.energy_wh;
        wh = sum;
      }
      const LlmFigures f = llm_figures(rows, flops, devices, peak_tflops, wh);
      rec.epochs = static_cast<int64_t>(
          std::count_if(rows.begin(), rows.end(), [](const IntervalRow& r) { return !r.warmup; }));
      rec.time_s = f.timed_s;
      rec.energy_wh = wh;
      const double nan = std::nan("");
      rec.counters.insert(
          rec.counters.begin(),
          {{kCounterIterations, static_cast<double>(f.iterations), "",
            "the last iteration reached"},
           {kCounterTimePerIteration, f.caraml_time_per_iteration_s, "s",
            "CARAML's Time/iteration: mean of the log lines' elapsed time per iteration, warm-up "
            "included"},
           {kCounterTokensPerS, f.caraml_tokens_per_s, "tokens/s",
            "CARAML's Tokens/second: B s / that mean"},
           {kCounterTflopsPerDevice, f.caraml_tflops_per_device, "TFLOP/s",
            "CARAML's Avg_TFLOPs/GPU: mean of the log lines' TFLOPs (k = 4 with recompute)"},
           {kCounterSteadyTimePerIteration, f.timed_iterations > 0 ? f.time_per_iteration_s : nan,
            "s", "timed window (timing_warmup_iters excluded): training time / iterations"},
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
      const double step_s = core::median(result.step_times_s);
      rec.counters.push_back(
          {"median_iteration_s", step_s, "s", "median timed iteration on rank 0"});
      rec.counters.push_back(
          {"gradient_wait_s", loop->comm_times().gradient_wait_s, "s",
           "rank 0's wait for the data-parallel all-reduce after backward (the distributed "
           "optimizer's reduce-scatter), timed iterations"});
      rec.counters.push_back({"tensor_parallel_comm_s", tp_comm_s, "s",
                              "rank 0's time in tensor-parallel collectives, all iterations"});
      rec.counters.push_back({"skipped_steps", static_cast<double>(result.skipped_steps), "",
                              "iterations the fp16 loss scaler skipped"});
      if (layout.pp > 1) {
        rec.counters.push_back({"pipeline_bubble_ideal", ideal_bubble, "",
                                "(P - 1) / (v m + P - 1): each stage's idle share with equal "
                                "stages and free transfers (v model chunks per rank)"});
        for (int p = 0; p < layout.pp; ++p)
          rec.counters.push_back({fmt::format("pipeline_idle_share_stage{}", p),
                                  stage_idle[static_cast<std::size_t>(p)], "",
                                  "measured: the stage's wait in pipeline receives / its timed "
                                  "training time (mean over its ranks)"});
        LOG_INFO(
            "pipeline: {} stages of {} model chunk(s), {} micro-batches per iteration, {}{}; "
            "idle share per stage (waiting in receives, timed iterations) {:.3f} against the "
            "ideal bubble {:.3f}",
            layout.pp, layout.chunks, layout.accumulation,
            to_string(PipelineSchedule::kOneForwardOneBackward),
            layout.chunks > 1 ? " interleaved" : "", fmt::join(stage_idle, " "), ideal_bubble);
      }
      LOG_INFO(
          "llm_training: {} iterations; CARAML: {:.4f} s/iteration, {:.1f} tokens/s, {:.3f} "
          "TFLOP/s per "
          "device (every log line); steady ({} iterations after {} warm-up): {:.4f} s/iteration, "
          "{:.1f} "
          "tokens/s, {:.3f} TFLOP/s per device, MFU {}",
          f.iterations, f.caraml_time_per_iteration_s, f.caraml_tokens_per_s,
          f.caraml_tflops_per_device, f.timed_iterations, cfg.timing_warmup_iters,
          f.time_per_iteration_s, f.tokens_per_s, f.tflops_per_device,
          f.mfu ? fmt::format("{:.2f}%", 100 * *f.mfu) : std::string("-"));
      if (f.tokens_per_wh)
        LOG_INFO("energy of the timed iterations: {:.4g} Wh, {:.4g} tokens/Wh, {:.4g} J/token", *wh,
                 *f.tokens_per_wh, *f.j_per_token);
    } else {
      LOG_WARN("stopped before the first log interval ended: no figures");
    }
    report::write_summary_json(run_dir, rec);
    const int64_t peak = train::device_peak_allocated_bytes(device);
    LOG_INFO("peak memory: process RSS {:.2f} GiB{}; phase wall times: {}",
             static_cast<double>(core::peak_rss_bytes()) / (1 << 30),
             peak >= 0 ? fmt::format(", {} allocated {:.2f} GiB", device.str(),
                                     static_cast<double>(peak) / (1 << 30))
                       : std::string(),
             phases.summary());
    if (result.stopped)
      LOG_WARN(
          "stopped by {} after iteration {}: the files are complete up to it; {} resumes the run",
          suite::signal_name(result.stop_signal), result.total_optimizer_steps,
          (run_dir / "restart.sh").string());
  }
  return result.stopped ? suite::kExitStoppedBySignal : 0;
}

}  // namespace

cli::Subcommand add_llm_training(CLI::App& app, int argc, char** argv) {
  return cli::add_workload_subcommand<LlmTrainingConfig>(
      app, "llm_training",
      "CARAML's LLM benchmark: GPT pre-training (Megatron-style tensor and data "
      "parallelism), tokens/s, TFLOP/s, MFU and energy",
      argc, argv, run);
}

}  // namespace scaffold::llm
