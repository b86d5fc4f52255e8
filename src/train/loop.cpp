#include "train/loop.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "core/stop.hpp"
#include "core/timer.hpp"
#include "data/sampler.hpp"
#include "dist/comm_counters.hpp"
#include "train/grad_clip.hpp"
#include "train/nonfinite.hpp"
#include "train/sharded_adam.hpp"

namespace scaffold::train {
namespace fs = std::filesystem;

namespace {

// Test hook: SCAFFOLD_FAIL_AT="<rank>:<step>" makes that rank throw at the start of its
// <step>-th training step (1-based, warm-up steps included), to prove that a failure on one rank
// ends every rank; "<rank>:<step>:hang" makes it stop there forever instead, without an error (for
// the progress watchdog). Not a user option; malformed values are an error, never ignored.
struct InjectedFailure {
  int64_t step = -1;  // -1: none on this rank
  bool hang = false;
};

InjectedFailure injected_failure(int rank) {
  const char* value = std::getenv("SCAFFOLD_FAIL_AT");
  if (value == nullptr || *value == '\0') return {};
  int target_rank = -1;
  long long step = -1;
  char mode[8] = {0};
  char tail = 0;
  const int fields = std::sscanf(value, "%d:%lld:%7[a-z]%c", &target_rank, &step, mode, &tail);
  const bool hang = fields == 3 && std::string(mode) == "hang";
  if ((fields != 2 && !hang) || target_rank < 0 || step < 1)
    throw core::Error(fmt::format(
        "SCAFFOLD_FAIL_AT='{}': expected <rank>:<step> or <rank>:<step>:hang with step >= 1",
        value));
  if (target_rank != rank) return {};
  return {static_cast<int64_t>(step), hang};
}

// Copies a batch's fields to the device (asynchronously from pinned memory on CUDA).
data::Batch to_device(const data::Batch& batch, const c10::Device& device) {
  data::Batch out;
  out.ids = batch.ids;
  out.fields.reserve(batch.fields.size());
  for (const at::Tensor& f : batch.fields)
    out.fields.push_back(f.to(device, /*non_blocking=*/true));
  return out;
}

std::vector<double> host_doubles(const at::Tensor& sums) {
  const at::Tensor host = sums.to(at::kCPU).to(at::kDouble).contiguous();
  return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
}

// The pass's sums and, appended, how many batches ended with them still finite, in one copy to
// the host. Fills out->sums and the first non-finite batch with its examples from `indices`.
void read_pass_sums(const at::Tensor& sums, const at::Tensor& finite_batches,
                    const std::vector<int64_t>& indices, int64_t batch_size, PassSums* out) {
  std::vector<double> host =
      host_doubles(at::cat({sums.to(at::kDouble), finite_batches.to(at::kDouble).view({1})}));
  const auto finite = static_cast<int64_t>(host.back());
  host.pop_back();
  out->sums = std::move(host);
  if (finite >= out->steps) return;
  out->first_nonfinite_batch = finite;
  const auto begin = static_cast<std::size_t>(
      std::min<int64_t>(finite * batch_size, static_cast<int64_t>(indices.size())));
  const auto end = std::min(begin + static_cast<std::size_t>(batch_size), indices.size());
  out->first_nonfinite_examples.assign(indices.begin() + static_cast<std::ptrdiff_t>(begin),
                                       indices.begin() + static_cast<std::ptrdiff_t>(end));
}

bool all_finite(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

}  // namespace

TrainingLoop::TrainingLoop(TrainingTask& task, LoopOptions options, c10::Device device,
                           dist::Communicator& comm, const dist::ProcessGrid& grid,
                           LoopParallelism parallel)
    : task_(task),
      options_(std::move(options)),
      device_(device),
      comm_(comm),
      grid_(grid),
      parallel_(std::move(parallel)),
      checkpoint_writer_(options_.async_save) {
  if (!options_.make_optimizer) throw core::Error("TrainingLoop: no optimizer factory given");
  if (options_.loss_scaling &&
      !(options_.loss_scale_init > 0.0 && options_.loss_scale_growth_interval >= 1))
    throw core::Error(
        fmt::format("TrainingLoop: loss scale {} and growth interval {} must be > 0 and >= 1",
                    options_.loss_scale_init, options_.loss_scale_growth_interval));
  if (options_.loss_scaling &&
      !(options_.loss_scale_min >= 0.0 && options_.loss_scale_min <= options_.loss_scale_init &&
        options_.loss_scale_hysteresis >= 1))
    throw core::Error(fmt::format(
        "TrainingLoop: minimum loss scale {} must be in [0, {}] (the initial scale) and "
        "hysteresis {} >= 1",
        options_.loss_scale_min, options_.loss_scale_init, options_.loss_scale_hysteresis));
  loss_scale_ = options_.loss_scale_init;
  hysteresis_left_ = options_.loss_scale_hysteresis;
  torch::nn::Module& module = task_.module();
  module.to(device_);
  optimizer_ = options_.make_optimizer(module.parameters());
  ShardedOptimizer* const owner = gradient_owner();
  if (parallel_.world && parallel_.world->size() > 1) {
    // Identical parameters (and buffers) everywhere: rank 0's, whatever each rank initialised.
    torch::NoGradGuard no_grad;
    for (const at::Tensor& p : module.parameters()) parallel_.world->broadcast(p, 0);
    for (const at::Tensor& b : module.buffers()) parallel_.world->broadcast(b, 0);
    // A distributed optimizer reduce-scatters the gradients itself, after backward.
    if (owner == nullptr)
      reducer_ = std::make_unique<dist::GradientReducer>(
          module.parameters(), *parallel_.world, 1.0 / grid_.replicas(), parallel_.bucket_bytes);
  }
  if (owner != nullptr) {
    if (!parallel_.world || owner->data_parallel_size() != parallel_.world->size())
      throw core::Error(fmt::format(
          "TrainingLoop: the distributed optimizer shards over {} ranks, the data-parallel group "
          "has {}",
          owner->data_parallel_size(), parallel_.world ? parallel_.world->size() : 1));
    // Each rank then holds only its slice of the gradient: a norm must add every rank's part.
    if (options_.grad_clip_norm > 0 && !options_.clip_gradients)
      throw core::Error(
          "TrainingLoop: with a distributed optimizer each rank holds a slice of the gradient, so "
          "clipping needs a clip_gradients hook that sums the squares over every rank");
  }
  const InjectedFailure injected = injected_failure(comm_.rank());
  fail_at_step_ = injected.step;
  hang_at_step_ = injected.hang;
  counters_.best_val_loss = std::numeric_limits<double>::infinity();
  if (options_.accumulation_steps < 1)
    throw core::Error(fmt::format("TrainingLoop: accumulation_steps {} must be >= 1",
                                  options_.accumulation_steps));
  // The global batch must fit both splits (docs/distributed.md); a stream wraps around its set.
  const int64_t global_batch = options_.local_batch_size * grid_.replicas();
  const auto n_train = static_cast<int64_t>(task_.training_set().size());
  const auto n_val = static_cast<int64_t>(task_.validation_set().size());
  const bool streamed = options_.train_batches_per_epoch > 0;
  // Name only the split that is too small: a user told "the training or validation set" has to
  // work out which one it was.
  std::vector<std::string> too_small;
  if (streamed ? n_train < 1 : global_batch > n_train)
    too_small.push_back(
        fmt::format("the training set ({} example{}) is smaller than the global batch {} "
                    "(local_batch_size {} x {} replicas)",
                    n_train, n_train == 1 ? "" : "s", global_batch, options_.local_batch_size,
                    grid_.replicas()));
  if (options_.validation_every > 0 && validation_batch() * grid_.replicas() > n_val)
    too_small.push_back(
        fmt::format("the validation set ({} example{}) is smaller than the global validation "
                    "batch {} ({} per replica x {} replicas)",
                    n_val, n_val == 1 ? "" : "s", validation_batch() * grid_.replicas(),
                    validation_batch(), grid_.replicas()));
  if (!too_small.empty())
    throw core::Error(
        fmt::format("{}; every rank needs one full batch of each split: use more examples, a "
                    "smaller batch or fewer ranks",
                    fmt::join(too_small, "; ")));
}

TrainingLoop::~TrainingLoop() = default;

ShardedOptimizer* TrainingLoop::gradient_owner() const {
  auto* sharded = dynamic_cast<ShardedOptimizer*>(optimizer_.get());
  return sharded != nullptr && sharded->reduces_gradients() ? sharded : nullptr;
}

double TrainingLoop::learning_rate_after(int64_t epochs_completed) const {
  return options_.lr_after ? options_.lr_after(epochs_completed)
                           : optimizer_->param_groups()[0].options().get_lr();
}

void TrainingLoop::set_learning_rate(double lr) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
}

void TrainingLoop::broadcast_buffers() {
  if (!options_.broadcast_buffers || !parallel_.world || parallel_.world->size() < 2) return;
  torch::NoGradGuard no_grad;
  for (const at::Tensor& b : task_.module().buffers()) parallel_.world->broadcast(b, 0);
}

bool TrainingLoop::unscale_gradients() {
  // After the all-reduce every replica holds the same gradients, so every rank decides alike
  // without communicating, unless the model is split over ranks (replica_comm): then the
  // verdict is agreed. One host read per step: only with loss scaling (fp16).
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : task_.module().parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  bool finite = true;
  if (!grads.empty()) {
    at::Tensor bad = at::zeros({}, grads[0].options().dtype(at::kBool));
    for (const at::Tensor& g : grads) bad = bad.logical_or(g.isfinite().logical_not().any());
    finite = !bad.item<bool>();  // hot-path-allowed: fp16 loss scaling's one host read per step
  }
  if ((parallel_.replica_comm != nullptr || gradient_owner() != nullptr) && comm_.size() > 1) {
    double bad_anywhere = finite ? 0.0 : 1.0;
    comm_.allreduce_max(&bad_anywhere, 1);
    finite = bad_anywhere == 0.0;
  }
  // Megatron's DynamicGradScaler.update: the hysteresis count is not reset by a good step, only
  // by growth, so once it is used up every overflow halves the scale.
  if (!finite) {
    good_steps_ = 0;
    if (--hysteresis_left_ <= 0) loss_scale_ = std::max(loss_scale_ * 0.5, options_.loss_scale_min);
    ++skipped_steps_;
    LOG_DEBUG("loss scaling: non-finite gradients, step skipped, scale now {}", loss_scale_);
    return false;
  }
  for (at::Tensor& g : grads) g.mul_(1.0 / loss_scale_);
  if (++good_steps_ >= options_.loss_scale_growth_interval) {
    loss_scale_ *= 2.0;
    good_steps_ = 0;
    hysteresis_left_ = options_.loss_scale_hysteresis;
  }
  return true;
}

bool TrainingLoop::stop_agreed() {
  // Each rank reads its own clock; the maximum makes the first to pass the deadline decide.
  const bool late = options_.deadline_mono_s > 0 && core::monotonic_s() >= options_.deadline_mono_s;
  double flags[2] = {static_cast<double>(core::stop_signal()), late ? 1.0 : 0.0};
  if (comm_.size() > 1) comm_.allreduce_max(flags, 2);
  stop_signal_ = static_cast<int>(flags[0]);
  if (flags[1] > 0) deadline_reached_ = true;
  return stop_signal_ != 0 || deadline_reached_;
}

void TrainingLoop::train_step(DeviceFeeder& feeder, bool first, bool last, at::Tensor* sums) {
  profile::Profiler* prof = options_.profiler;
  SCAFFOLD_PROFILE_REGION(prof, "run_training_batch");
  if (++steps_taken_ == fail_at_step_) {
    if (hang_at_step_) {
      LOG_ERROR("injected hang (SCAFFOLD_FAIL_AT) at training step {} on rank {}", steps_taken_,
                comm_.rank());
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    throw core::Error(
        fmt::format("injected failure (SCAFFOLD_FAIL_AT) at training step {} on rank {}",
                    steps_taken_, comm_.rank()));
  }
  data::Batch batch;
  {
    SCAFFOLD_PROFILE_REGION(prof, "image_to_device");
    batch =
        feeder.take();  // copied while the previous step computed; the device waits, not the host
  }
  broadcast_buffers();
  if (options_.forward_backward) {
    // The step's micro-batches go to the schedule together, once the last has arrived.
    if (first) step_batches_.clear();
    step_batches_.push_back(std::move(batch));
    if (!last) return;
    clear_gradients(*optimizer_);
    MicroBatchRun run;
    run.batches = std::move(step_batches_);
    step_batches_.clear();
    run.loss_multiplier = (options_.loss_scaling ? loss_scale_ : 1.0) /
                          static_cast<double>(options_.accumulation_steps);
    const bool accumulated = run.batches.size() > 1;
    run.before_last_backward = [this, accumulated] {
      if (reducer_) reducer_->prepare(/*include_accumulated=*/accumulated);
    };
    *sums += options_.forward_backward(run).to(at::kDouble);
  } else {
    const TrainForward out = task_.train_forward(batch);
    {
      SCAFFOLD_PROFILE_REGION(prof, "backward");
      if (first) clear_gradients(*optimizer_);
      // Only the last micro-batch's backward is reduced, its buckets carrying the gradients the
      // earlier ones accumulated; gradient buckets start all-reducing as they fill.
      if (last && reducer_) reducer_->prepare(/*include_accumulated=*/!first);
      at::Tensor loss = out.loss;
      if (options_.accumulation_steps > 1)
        loss = loss / static_cast<double>(options_.accumulation_steps);
      (options_.loss_scaling ? loss * loss_scale_ : loss).backward();
    }
    *sums += out.sums.to(at::kDouble);  // every micro-batch counts, whether or not it steps
    if (!last) return;
  }
  if (reducer_) {
    SCAFFOLD_PROFILE_REGION(prof, "gradient_allreduce");
    reducer_->finish();
  }
  if (options_.finish_gradients) options_.finish_gradients();
  if (ShardedOptimizer* owner = gradient_owner()) {
    // The model-parallel sums above are linear, so they may come before the data-parallel one.
    SCAFFOLD_PROFILE_REGION(prof, "gradient_reduce_scatter");
    const core::Stopwatch clock;
    owner->reduce_scatter_gradients(1.0 / grid_.replicas());
    reduce_scatter_s_ += clock.elapsed_s();
  }
  SCAFFOLD_PROFILE_REGION(prof, "step_and_update");
  if (options_.loss_scaling && !unscale_gradients())
    return;  // skipped: parameters stay, scale lowered
  // The norm stays on the device (1.13's clip_grad_norm_ returns it to the host: a sync); a model-
  // parallel task clips over its whole model through the hook.
  if (options_.clip_gradients)
    options_.clip_gradients(options_.grad_clip_norm, *optimizer_);
  else if (options_.grad_clip_norm > 0)
    clip_grad_norm(task_.module().parameters(), options_.grad_clip_norm, optimizer_.get());
  optimizer_->step();
  task_.after_step();
}

PassSums TrainingLoop::train_epoch(int64_t epoch, int64_t max_batches,
                                   std::vector<double>* step_times) {
  task_.module().train();
  const data::ExampleSource& set = task_.training_set();
  const auto batch_size = options_.local_batch_size;
  const int64_t k = options_.accumulation_steps;
  const int64_t first_step = counters_.total_optimizer_steps;
  const int64_t steps_left =
      options_.max_steps >= 0 ? std::max<int64_t>(0, options_.max_steps - first_step) : -1;
  std::vector<int64_t> indices;
  if (options_.train_batches_per_epoch > 0) {
    const int64_t steps = steps_left >= 0 ? std::min(steps_left, options_.train_batches_per_epoch)
                                          : options_.train_batches_per_epoch;
    indices = data::stream_indices(static_cast<int64_t>(set.size()), grid_.replicas(),
                                   grid_.replica(), first_step, steps, batch_size, k);
  } else {
    indices = data::training_indices(static_cast<int64_t>(set.size()), grid_.replicas(),
                                     grid_.replica(), options_.seed, epoch);
    if (max_batches >= 0)
      indices.resize(std::min<std::size_t>(indices.size(),
                                           static_cast<std::size_t>(max_batches * batch_size)));
    // Every replica holds the same number of indices (DistributedSampler pads), so all drop alike.
    if (options_.drop_last)
      indices.resize(indices.size() / static_cast<std::size_t>(batch_size) * batch_size);
    // Whole optimizer steps only, and no more than the step cap allows.
    if (k > 1)
      indices.resize(indices.size() / static_cast<std::size_t>(k * batch_size) * k * batch_size);
    if (steps_left >= 0)
      indices.resize(std::min<std::size_t>(indices.size(),
                                           static_cast<std::size_t>(steps_left * k * batch_size)));
  }
  // Augmentation is keyed by (seed, epoch, example), the same for any number of loader threads.
  PassSums out;
  out.draw_key = core::stream_key({options_.seed, static_cast<uint64_t>(epoch), 0x747261696eULL});
  data::BatchLoader loader(set, indices, static_cast<int>(batch_size), options_.loader_workers,
                           device_.is_cuda(), out.draw_key);
  at::Tensor sums = at::zeros({static_cast<int64_t>(task_.training_sum_names().size())},
                              at::TensorOptions().dtype(at::kDouble).device(device_));
  // Batches after which the running sums were still finite, counted on the device (no host
  // read per step): a NaN or Inf stays in the running sums, so this is the first bad batch.
  at::Tensor finite_batches = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device_));
  // A progress line on a terminal (and a log line every 30 s elsewhere) for long epochs.
  core::Progress progress(epoch == 0 ? std::string("warm-up") : fmt::format("epoch {}", epoch),
                          loader.batches());
  // Steps are marked on the device's timeline and read once, after the epoch; batches are copied
  // one ahead, so the host never waits for the device inside the loop (docs/architecture.md).
  const std::unique_ptr<StepClock> step_clock = make_step_clock(device_);
  const std::unique_ptr<DeviceFeeder> feeder = make_device_feeder(device_);
  SCAFFOLD_PROFILE_REGION(options_.profiler, "batch_loop");
  data::Batch batch;  // the next batch, on the host
  bool more = loader.next(&batch);
  if (more) feeder->prefetch(batch);
  while (more) {
    if (options_.profiler && epoch > 0) options_.profiler->step();  // timed batches only
    if (options_.lr_at_step)
      set_learning_rate(options_.lr_at_step(first_step + out.optimizer_steps));
    std::map<std::string, dist::CommCounter> counters_before;
    if (step_times) counters_before = dist::comm_counters();  // timed steps only
    const double wait_before = gradient_wait_s();
    if (step_times) step_clock->start();
    // One optimizer step: k micro-batches (the index list holds whole steps when k > 1). The next
    // micro-batch's copy starts while this one still runs on the device.
    for (int64_t m = 0; m < k; ++m) {
      if (!more)
        throw core::Error(
            fmt::format("training: the epoch ended inside optimizer step {} (micro-batch {} of {})",
                        first_step + out.optimizer_steps + 1, m + 1, k));
      const auto examples = static_cast<double>(batch.ids.size());
      train_step(*feeder, m == 0, m == k - 1, &sums);
      finite_batches += sums.isfinite().all();
      more = loader.next(&batch);
      if (more) feeder->prefetch(batch);
      out.samples += examples;
      ++out.steps;
      progress.add();
      if (options_.watchdog && m + 1 < k) options_.watchdog->beat();
    }
    if (step_times) step_clock->stop();
    ++out.optimizer_steps;
    if (options_.watchdog) options_.watchdog->beat();
    if (step_times) {
      for (const auto& [name, counter] : dist::comm_counters()) {
        const auto before = counters_before.find(name);
        comm_times_.counter_s[name] +=
            counter.seconds - (before == counters_before.end() ? 0.0 : before->second.seconds);
      }
      comm_times_.gradient_wait_s += gradient_wait_s() - wait_before;
    }
    if (stop_agreed()) break;  // the step in flight is done; the rest of the epoch is not run
  }
  // hot-path-allowed: begin (once per epoch, after the last step: the step times and the sums)
  if (step_times) {
    const std::vector<double> times_s = step_clock->collect_s();
    step_times->insert(step_times->end(), times_s.begin(), times_s.end());
  }
  read_pass_sums(sums, finite_batches, indices, batch_size, &out);
  // hot-path-allowed: end
  return out;
}

PassSums TrainingLoop::validate(int64_t max_batches) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "evaluate");
  torch::nn::Module& module = task_.module();
  module.eval();
  PassSums out;
  {
    c10::InferenceMode no_grad;
    const data::ExampleSource& set = task_.validation_set();
    auto indices = data::validation_indices(static_cast<int64_t>(set.size()), grid_.replicas(),
                                            grid_.replica());
    const auto batch_size = validation_batch();
    if (max_batches >= 0)
      indices.resize(std::min<std::size_t>(indices.size(),
                                           static_cast<std::size_t>(max_batches * batch_size)));
    out.draw_key = core::stream_key({options_.seed, 0x76616cULL});
    data::BatchLoader loader(set, indices, static_cast<int>(batch_size), options_.loader_workers,
                             device_.is_cuda(), out.draw_key);
    at::Tensor sums = at::zeros({static_cast<int64_t>(task_.validation_sum_names().size())},
                                at::TensorOptions().dtype(at::kDouble).device(device_));
    at::Tensor finite_batches = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device_));
    data::Batch batch;
    while (loader.next(&batch)) {
      sums += task_.validation_sums(to_device(batch, device_)).to(at::kDouble);
      finite_batches += sums.isfinite().all();
      out.samples += static_cast<double>(batch.ids.size());
      ++out.steps;
      if (options_.watchdog) options_.watchdog->beat();
    }
    read_pass_sums(sums, finite_batches, indices, batch_size, &out);
  }
  task_.after_validation();
  module.train();
  return out;
}

double TrainingLoop::warmup() {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "warmup");
  core::Stopwatch clock;
  warmup_start_mono_s_ = core::monotonic_s();
  torch::nn::Module& module = task_.module();
  const std::string snapshot = serialize_state(module, *optimizer_, with_scaler());
  // train_epoch stops after min(warmup_batches, this replica's batches): ScaFFold's
  // min(warmup_batches, len(train_loader)).
  if (options_.warmup_batches > 0) {
    warmup_steps_ = train_epoch(0, options_.warmup_batches, nullptr).steps;  // epoch-0 order
    validate(options_.warmup_batches);
  }
  // Undo every effect: a fresh optimiser, then the snapshot's parameters, state and RNG.
  optimizer_ = options_.make_optimizer(module.parameters());
  counters_ = deserialize_state(snapshot, "warm-up snapshot", module, *optimizer_);
  adopt_scaler(/*from_checkpoint=*/false);
  comm_.barrier();
  warmup_end_mono_s_ = core::monotonic_s();
  return clock.elapsed_s();
}

void check_same_parameters(dist::Communicator& comm, const std::vector<at::Tensor>& params,
                           const std::string& when, bool* warned) {
  // A weighted checksum, its spread over the world.
  double sum = 0.0;
  {
    torch::NoGradGuard no_grad;
    double weight = 1.0;
    for (const at::Tensor& p : params) {
      sum += weight * p.sum(at::kDouble).item<double>();
      weight += 1.0;
    }
  }
  double extremes[2] = {sum, -sum};
  comm.allreduce_max(extremes, 2);
  const double high = extremes[0], low = -extremes[1];
  const double spread = high - low;
  const double scale = std::max({std::abs(high), std::abs(low), 1e-30});
  if (spread > 1e-6 * scale || !std::isfinite(spread))
    throw dist::AgreedError(
        fmt::format("the ranks' parameters differ {} (checksums {} to {}): gradient reduction "
                    "is broken",
                    when, low, high));
  if (spread > 0 && warned != nullptr && !*warned) {
    *warned = true;
    LOG_WARN(
        "the ranks' parameters differ in the last bits {} (checksum spread {:.3g} relative): the "
        "MPI "
        "library's all-reduce is not bitwise identical on every rank",
        when, spread / scale);
  }
}

void TrainingLoop::check_replicas_agree(int64_t epoch) {
  // Every rank applies the same reduced gradients to the same broadcast start.
  if (!reducer_ && gradient_owner() == nullptr) return;
  const std::string when = fmt::format("after epoch {}", epoch);
  if (parallel_.replica_comm == nullptr) {
    check_same_parameters(comm_, task_.module().parameters(), when, &warned_replica_drift_);
    return;
  }
  // Each group of replicas checks its own shards; the verdict is every rank's.
  dist::run_agreed(comm_, [&] {
    check_same_parameters(*parallel_.replica_comm, task_.module().parameters(), when,
                          &warned_replica_drift_);
  });
}

TrainCounters TrainingLoop::with_scaler() const {
  TrainCounters c = counters_;
  if (options_.loss_scaling) {
    c.loss_scale = loss_scale_;
    c.loss_scale_good_steps = good_steps_;
    c.loss_scale_hysteresis_left = hysteresis_left_;
  }
  return c;
}

void TrainingLoop::adopt_scaler(bool from_checkpoint) {
  // A checkpoint without the scaler's state (no loss scaling, or an older file) keeps the start;
  // so does every checkpoint unless loss_scale_resumed (GradScaler's runs start again).
  if (!options_.loss_scaling || !(counters_.loss_scale > 0.0)) return;
  if (from_checkpoint && !options_.loss_scale_resumed) return;
  loss_scale_ = counters_.loss_scale;
  good_steps_ = counters_.loss_scale_good_steps;
  hysteresis_left_ = counters_.loss_scale_hysteresis_left;
}

bool TrainingLoop::per_rank_state() const {
  return options_.per_rank_checkpoints ||
         dynamic_cast<const ShardedOptimizer*>(optimizer_.get()) != nullptr;
}

fs::path TrainingLoop::checkpoint_file(const fs::path& dir, const std::string& name) const {
  return per_rank_state() ? dir / fmt::format("{}.rank{}", name, comm_.rank()) : dir / name;
}

TrainCounters TrainingLoop::resume_per_rank(const fs::path& dir) {
  // Each rank reads its own file; last, then best, each tried by every rank and taken only when
  // every rank could read its own (no file is renamed: one rank's damage must not part the ranks).
  std::string errors;
  for (const char* name : {"checkpoint_last", "checkpoint_best"}) {
    const fs::path file = checkpoint_file(dir, name);
    std::error_code ec;
    std::string mismatch, error;
    try {
      if (!fs::exists(file, ec)) throw core::FileError(file.string(), "missing");
      optimizer_ = options_.make_optimizer(task_.module().parameters());
      counters_ = load_checkpoint(file, task_.module(), *optimizer_);
      adopt_scaler(/*from_checkpoint=*/true);
    } catch (const CheckpointMismatch& e) {
      mismatch = e.what();
    } catch (const core::Error& e) {
      error = e.what();
    }
    // Any rank's mismatch ends the run with it; a missing or damaged file tries the next name.
    const std::vector<std::string> mismatches =
        comm_.size() > 1 ? comm_.allgather(mismatch) : std::vector{mismatch};
    for (const std::string& m : mismatches)
      if (!m.empty())
        throw dist::AgreedError(
            fmt::format("{}: cannot restart with this command: {}; the checkpoints are unchanged",
                        dir.string(), m));
    const std::vector<std::string> failed =
        comm_.size() > 1 ? comm_.allgather(error) : std::vector{error};
    std::string these;
    for (std::size_t r = 0; r < failed.size(); ++r)
      if (!failed[r].empty()) these += fmt::format("\n  rank {}: {}", r, failed[r]);
    if (these.empty()) {
      LOG_INFO("resumed from {} on every rank (epoch {}, {} optimizer steps)", file.string(),
               counters_.epoch, counters_.total_optimizer_steps);
      return counters_;
    }
    errors += these;
  }
  throw dist::AgreedError(
      fmt::format("{}: no checkpoint_last.rank<R> or checkpoint_best.rank<R> that every rank "
                  "can read (a distributed optimizer or a tensor-parallel model saves one file per "
                  "rank; was the run written with another use_distributed_optimizer, "
                  "tensor-parallel size or rank count?){}",
                  dir.string(), errors));
}

TrainCounters TrainingLoop::resume(const fs::path& dir) {
  if (per_rank_state()) return resume_per_rank(dir);
  std::string errors;
  for (const char* name : {"checkpoint_last", "checkpoint_best"}) {
    const fs::path file = dir / name;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    try {
      optimizer_ = options_.make_optimizer(task_.module().parameters());
      counters_ = load_checkpoint(file, task_.module(), *optimizer_);
      adopt_scaler(/*from_checkpoint=*/true);
      LOG_INFO("resumed from {} (epoch {}, {} {:.4f}, {} optimizer steps)", file.string(),
               counters_.epoch, options_.target ? "validation metric" : "last metric",
               counters_.stop_value, counters_.total_optimizer_steps);
      return counters_;
    } catch (const CheckpointMismatch& e) {
      // Intact but not this command's model or optimiser: the command is wrong. Leave every
      // checkpoint as it is, so the run resumes once the flags are put right.
      throw core::FileError(dir.string(),
                            std::string("cannot restart with this command: ") + e.what() +
                                "; the checkpoints are unchanged (restart with the run's "
                                "own config.yaml, as its restart.sh does)");
    } catch (const core::Error& e) {
      LOG_WARN("{}; renaming it {}.corrupt", e.what(), file.filename().string());
      fs::rename(file, fs::path(file.string() + ".corrupt"), ec);
      errors += std::string("\n  ") + e.what();
    }
  }
  std::error_code ec;
  if (fs::exists(dir / "checkpoint_last.rank0", ec))
    errors +=
        "\n  (checkpoint_last.rank<R> files are there: that run kept state per rank (a sharded "
        "optimizer or "
        "a tensor-parallel model); resume it with the same use_distributed_optimizer and "
        "tensor-parallel size)";
  throw core::FileError(dir.string(),
                        "no usable checkpoint_last or checkpoint_best to restart from" + errors);
}

void TrainingLoop::save(const std::string& name) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "checkpoint");
  // The state is copied here; with async_save only the file write runs on while training goes on.
  // checkpoint_s_ is the time the training waits for it (CARAML's TotalCheckpointTime).
  core::Stopwatch clock;
  if (comm_.rank() == 0 || per_rank_state())
    checkpoint_writer_.write(checkpoint_file(options_.checkpoint_dir, name),
                             serialize_state(task_.module(), *optimizer_, with_scaler()));
  checkpoint_s_ += clock.elapsed_s();
}

LoopResult TrainingLoop::run(const std::function<void(const LoopEpoch&)>& on_epoch) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "train");
  LoopResult result;
  result.total_optimizer_steps = counters_.total_optimizer_steps;
  int64_t epoch = counters_.epoch + 1;
  double stop_value = counters_.stop_value;
  set_learning_rate(learning_rate_after(counters_.epoch));
  bool saved_last_epoch = true;
  const auto reached = [&](double v) { return options_.target && v >= *options_.target; };
  double timed_s = 0.0;  // this process's timed epochs, for the time budget
  while (!reached(stop_value)) {
    const bool warmup = epoch <= options_.warmup_epochs;
    if (options_.max_epochs != -1 && epoch > options_.warmup_epochs + options_.max_epochs) break;
    if (options_.time_budget_s > 0 && timed_s >= options_.time_budget_s) break;
    if (options_.max_steps >= 0 && counters_.total_optimizer_steps >= options_.max_steps) break;
    if (deadline_reached_) break;
    core::Stopwatch epoch_clock;
    LoopEpoch st;
    st.start_mono_s = core::monotonic_s();
    st.train = train_epoch(epoch, -1, &st.step_times_s);
    if (stop_signal_ != 0) break;  // stopped mid-epoch: not validated, not reported
    st.train_s = epoch_clock.elapsed_s();
    st.validation_start_mono_s = core::monotonic_s();
    st.validated = options_.validation_every > 0 && epoch % options_.validation_every == 0;
    if (st.validated) {
      st.val = validate(options_.validation_batches);
    } else {
      st.val.sums.assign(task_.validation_sum_names().size(), 0.0);
    }
    // Metrics are summed over data-parallel replicas only (each replica counted once).
    std::vector<double> sums = st.train.sums;
    sums.insert(sums.end(), st.val.sums.begin(), st.val.sums.end());
    sums.push_back(st.train.samples);
    sums.push_back(st.val.samples);
    comm_.allreduce_sum(sums.data(), sums.size());
    for (double& s : sums) s /= static_cast<double>(task_.sum_multiplicity());
    const std::size_t n_train = st.train.sums.size();
    std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(n_train),
              st.train.sums.begin());
    std::copy(sums.begin() + static_cast<std::ptrdiff_t>(n_train), sums.end() - 2,
              st.val.sums.begin());
    st.train.samples = sums[sums.size() - 2];
    st.val.samples = sums[sums.size() - 1];
    st.epoch = epoch;
    st.warmup = warmup;
    if (!all_finite(st.train.sums) || !all_finite(st.val.sums)) {
      // Every rank holds the same reduced sums, so every rank is here and the task's error is
      // the same on each: say it once, with where the non-finite values came from.
      const std::string origin = nonfinite_origin(epoch, st, counters_.total_optimizer_steps);
      try {
        st.metrics = task_.epoch_metrics(epoch, st.train, st.val);
      } catch (const core::Error& e) {
        throw dist::AgreedError(std::string(e.what()) + "; " + origin);
      }
    } else {
      st.metrics = task_.epoch_metrics(epoch, st.train, st.val);
    }
    st.next_lr = learning_rate_after(epoch);
    set_learning_rate(st.next_lr);
    st.duration_s = epoch_clock.elapsed_s();
    st.end_mono_s = core::monotonic_s();
    st.validation_s = st.duration_s - st.train_s;
    st.optimizer_steps = st.train.optimizer_steps;
    counters_.total_optimizer_steps += st.train.optimizer_steps;
    st.total_optimizer_steps = counters_.total_optimizer_steps;
    st.median_step_s = core::median(st.step_times_s);
    if (!warmup) {
      result.step_times_s.insert(result.step_times_s.end(), st.step_times_s.begin(),
                                 st.step_times_s.end());
      result.timed_s += st.duration_s;
      timed_s += st.duration_s;
      ++result.timed_epochs;
    }

    check_replicas_agree(epoch);
    counters_.epoch = epoch;
    counters_.stop_value = st.metrics.stop_value;
    counters_.val_loss_avg = st.metrics.val_loss;
    const bool best = st.metrics.val_loss < counters_.best_val_loss;
    if (best) counters_.best_val_loss = st.metrics.val_loss;
    on_epoch(st);
    saved_last_epoch = false;
    if (options_.checkpoint_interval > 0 && epoch % options_.checkpoint_interval == 0) {
      save("checkpoint_last");
      saved_last_epoch = true;
      unsaved_epoch_state_.clear();
    } else if (options_.checkpoint_interval > 1 && (comm_.rank() == 0 || per_rank_state())) {
      unsaved_epoch_state_ = serialize_state(task_.module(), *optimizer_, with_scaler());
    }
    // Whenever it improves, not only on checkpoint epochs, so it cannot miss the best epoch.
    if (best && options_.checkpoint_interval > 0) save("checkpoint_best");
    stop_value = st.metrics.stop_value;
    ++result.epochs_run;
    ++epoch;
  }
  if (stop_signal_ != 0) {
    // The last completed epoch's state, not the partial epoch's: a restart then continues
    // exactly as an uninterrupted run would from that epoch.
    // (With checkpoint_interval 1 every completed epoch is already saved.)
    if (!unsaved_epoch_state_.empty())
      checkpoint_writer_.write(checkpoint_file(options_.checkpoint_dir, "checkpoint_last"),
                               std::move(unsaved_epoch_state_));
    result.stopped = true;
    result.stop_signal = stop_signal_;
  } else if (options_.checkpoint_interval > 0 && !saved_last_epoch) {
    save("checkpoint_last");
  }
  checkpoint_writer_.wait();  // every file on disk before run() returns
  comm_.barrier();
  result.converged = reached(stop_value);
  result.last_epoch = counters_.epoch;
  result.total_optimizer_steps = counters_.total_optimizer_steps;
  result.final_stop_value = stop_value;
  result.skipped_steps = skipped_steps_;
  result.deadline_reached = deadline_reached_;
  return result;
}

std::string TrainingLoop::nonfinite_origin(int64_t epoch, const LoopEpoch& st, int64_t first_step) {
  // This rank's first non-finite batch, training before validation, and its input data.
  struct Finding {
    bool bad_data = false;
    int64_t order = -1;  // when it happened: training steps first, then validation batches
    std::string text;
  };
  Finding mine;
  const bool in_training = st.train.first_nonfinite_batch >= 0;
  const PassSums& pass = in_training ? st.train : st.val;
  if (pass.first_nonfinite_batch >= 0) {
    const data::ExampleSource& set = in_training ? task_.training_set() : task_.validation_set();
    const std::vector<std::string> bad =
        nonfinite_inputs(set, pass.first_nonfinite_examples, pass.draw_key);
    const std::string where =
        in_training
            ? fmt::format(
                  "the training sums first turned non-finite in optimizer step {} (batch {} of "
                  "epoch {})",
                  first_step + pass.first_nonfinite_batch / options_.accumulation_steps + 1,
                  pass.first_nonfinite_batch + 1, epoch)
            : fmt::format(
                  "the validation sums first turned non-finite in validation batch {} of epoch {}",
                  pass.first_nonfinite_batch + 1, epoch);
    mine.bad_data = !bad.empty();
    mine.order = pass.first_nonfinite_batch + (in_training ? 0 : st.train.steps);
    std::vector<std::string> names;  // the batch's files, or its example indices
    for (const int64_t i : pass.first_nonfinite_examples) {
      const std::string origin = set.origin(static_cast<std::size_t>(i));
      names.push_back(origin.empty() ? fmt::format("example {}", i) : origin);
    }
    if (bad.empty())
      mine.text = fmt::format(
          "{}, whose input data ({}) is finite, so the model diverged, not the data (a lower "
          "learning rate, or fp32 "
          "instead of reduced precision, may help)",
          where, fmt::join(names, ", "));
    else
      mine.text = fmt::format(
          "{}, whose input data holds non-finite values: {} (replace or regenerate the data)",
          where, fmt::join(bad, "; "));
  }
  // Every rank's finding, as "<bad data 0|1> <order> <text>".
  const std::string packed = fmt::format("{} {} {}", mine.bad_data ? 1 : 0, mine.order, mine.text);
  const std::vector<std::string> gathered =
      comm_.size() > 1 ? comm_.allgather(packed) : std::vector<std::string>{packed};
  std::vector<Finding> all;
  for (const std::string& g : gathered) {
    Finding f;
    const std::size_t a = g.find(' '), b = g.find(' ', a + 1);
    f.bad_data = g.substr(0, a) == "1";
    f.order = std::stoll(g.substr(a + 1, b - a - 1));
    f.text = g.substr(b + 1);
    all.push_back(std::move(f));
  }
  // Ranks whose data held NaN or Inf explain it; otherwise the ranks that turned first (with data
  // parallelism one rank's NaN reaches every rank through the gradient all-reduce a step later).
  const bool any_bad_data =
      std::any_of(all.begin(), all.end(), [](const Finding& f) { return f.bad_data; });
  int64_t earliest = -1;
  for (const Finding& f : all)
    if (f.order >= 0 && (earliest < 0 || f.order < earliest)) earliest = f.order;
  std::string text;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const Finding& f = all[r];
    if (f.order < 0 || (any_bad_data ? !f.bad_data : f.order != earliest)) continue;
    text += (text.empty() ? "" : "; ") +
            (all.size() > 1 ? fmt::format("rank {}: ", r) : std::string()) + f.text;
  }
  if (text.empty())
    text = "every rank's own sums were finite: they overflowed when summed over the ranks";
  return text;
}

}  // namespace scaffold::train
