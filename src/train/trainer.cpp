#include "train/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <torch/utils.h>

#include <algorithm>
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
#include "core/timer.hpp"
#include "dataset/sampler.hpp"
#include "dist/halo.hpp"
#include "model/autocast.hpp"
#include "train/loss.hpp"
#include "train/schedule.hpp"

namespace scaffold::train {
namespace fs = std::filesystem;

// Per-rank partial sums of one pass over a split, reduced over replicas before use.
struct Trainer::EpochSums {
  double loss = 0.0;     // sum of batch-mean loss x batch size
  double dice = 0.0;     // sum of per-sample Dice (soft in training, hard in validation)
  double samples = 0.0;
  int64_t steps = 0;
};

namespace {

// The autocast state of a forward pass: bf16 on the training device when amp is on, else off.
model::AutocastState forward_autocast(const c10::Device& device, bool amp_bf16) {
  model::AutocastState s = model::AutocastState::current().disabled();
  if (amp_bf16) {
    if (device.is_cuda()) {
      s.cuda_enabled = true;
      s.cuda_dtype = at::kBFloat16;
    } else {
      s.cpu_enabled = true;
      s.cpu_dtype = at::kBFloat16;
    }
  }
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

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
    throw core::Error(
        fmt::format("SCAFFOLD_FAIL_AT='{}': expected <rank>:<step> or <rank>:<step>:hang with step >= 1", value));
  if (target_rank != rank) return {};
  return {static_cast<int64_t>(step), hang};
}

}  // namespace

c10::Device resolve_device(const std::string& key) {
  const bool cuda = torch::cuda::is_available();
  if (key == "cpu" || (key == "auto" && !cuda)) return c10::Device(c10::kCPU);
  if (!cuda)
    throw core::Error("device: cuda was asked for, but this LibTorch has no CUDA or no GPU is "
                      "visible; use device: auto or cpu");
  return c10::Device(c10::kCUDA, 0);
}

Trainer::Trainer(model::UNet3d model, TrainerOptions options, const dataset::FractalDataset& train_set,
                 const dataset::FractalDataset& val_set, c10::Device device, dist::Communicator& comm,
                 const dist::ProcessGrid& grid, Parallelism parallel)
    : model_(std::move(model)),
      options_(std::move(options)),
      train_set_(train_set),
      val_set_(val_set),
      device_(device),
      comm_(comm),
      grid_(grid),
      parallel_(std::move(parallel)) {
  model_->to(device_);
  if (parallel_.world && parallel_.world->size() > 1) {
    // Identical parameters (and buffers) everywhere: rank 0's, whatever each rank initialised.
    torch::NoGradGuard no_grad;
    for (const at::Tensor& p : model_->parameters()) parallel_.world->broadcast(p, 0);
    for (const at::Tensor& b : model_->buffers()) parallel_.world->broadcast(b, 0);
    reducer_ = std::make_unique<dist::GradientReducer>(
        model_->parameters(), *parallel_.world, 1.0 / grid_.replicas(), parallel_.bucket_bytes);
  }
  if (parallel_.spatial) {
    spatial_sum_ = [ctx = parallel_.spatial](const at::Tensor& t) { return model::spatial_sum(t, ctx); };
  }
  const InjectedFailure injected = injected_failure(comm_.rank());
  fail_at_step_ = injected.step;
  hang_at_step_ = injected.hang;
  optimizer_ = make_optimizer();
  counters_.best_val_loss = std::numeric_limits<double>::infinity();
  // Global batch must fit both splits (spec §6.1 step 9).
  const int64_t global_batch = options_.local_batch_size * grid_.replicas();
  if (global_batch > static_cast<int64_t>(train_set_.size()) ||
      global_batch > static_cast<int64_t>(val_set_.size()))
    throw core::Error(fmt::format(
        "global batch {} (local_batch_size {} x {} replicas) is larger than the training ({}) or "
        "validation ({}) set",
        global_batch, options_.local_batch_size, grid_.replicas(), train_set_.size(), val_set_.size()));
}

Trainer::~Trainer() = default;

std::unique_ptr<torch::optim::Optimizer> Trainer::make_optimizer() {
  const auto params = model_->parameters();
  const double lr = options_.learning_rate;
  if (options_.optimizer == "ADAM")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  if (options_.optimizer == "SGD")
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
  return std::make_unique<torch::optim::RMSprop>(
      params, torch::optim::RMSpropOptions(lr).alpha(0.99).eps(1e-8));
}

double Trainer::learning_rate_after(int64_t epochs_completed) const {
  if (options_.disable_scheduler) return options_.learning_rate;
  return CosineWarmRestarts(options_.learning_rate, options_.min_learning_rate, options_.T_0,
                            options_.T_mult)
      .lr_after(epochs_completed);
}

void Trainer::set_learning_rate(double lr) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
}

void Trainer::estimate_class_weights() {
  const auto n_train = static_cast<int64_t>(train_set_.size());
  const auto indices = ce_weight_sample_indices(n_train, options_.ce_weight_sample_fraction);
  std::vector<int64_t> counts(static_cast<std::size_t>(options_.n_classes), 0);
  dist::run_agreed(comm_, [&] {
    for (int64_t i : indices) {
      const auto local = class_counts(train_set_.get(static_cast<std::size_t>(i)).mask, options_.n_classes);
      for (std::size_t c = 0; c < counts.size(); ++c) counts[c] += local[c];
    }
  });
  // Spatial shards of one sample hold disjoint voxels and replicas read the same samples, so the
  // world sum over-counts each voxel `replicas` times: the ratios, and so the weights, are unchanged.
  comm_.allreduce_sum(counts.data(), counts.size());
  const at::Tensor w = ce_class_weights(counts);
  class_weights_.assign(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  class_weights_tensor_ = w.to(device_);
  LOG_INFO("CE class weights from {} of {} training masks: background {:.4g}, foreground {:.4g}",
           indices.size(), n_train, class_weights_[0],
           class_weights_.size() > 1 ? class_weights_[1] : 0.0);
}

at::Tensor Trainer::train_step(const dataset::Batch& batch) {
  profile::Profiler* prof = options_.profiler;
  SCAFFOLD_PROFILE_REGION(prof, "run_training_batch");
  if (++steps_taken_ == fail_at_step_) {
    if (hang_at_step_) {
      LOG_ERROR("injected hang (SCAFFOLD_FAIL_AT) at training step {} on rank {}", steps_taken_, comm_.rank());
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    throw core::Error(fmt::format("injected failure (SCAFFOLD_FAIL_AT) at training step {} on rank {}",
                                  steps_taken_, comm_.rank()));
  }
  at::Tensor image, mask;
  {
    SCAFFOLD_PROFILE_REGION(prof, "image_to_device");
    image = batch.image.to(device_, /*non_blocking=*/true);
    mask = batch.mask.to(device_, /*non_blocking=*/true);
  }
  at::Tensor logits;
  {
    SCAFFOLD_PROFILE_REGION(prof, "predict");
    model::AutocastGuard amp(forward_autocast(device_, options_.amp_bf16));
    logits = model_->forward(image);
  }
  LossTerms terms;
  {
    SCAFFOLD_PROFILE_REGION(prof, "calculate_loss");
    terms = segmentation_loss(logits, mask, class_weights_tensor_, spatial_sum_);
  }
  {
    SCAFFOLD_PROFILE_REGION(prof, "backward");
    optimizer_->zero_grad();
    if (reducer_) reducer_->prepare();
    terms.loss.backward();  // gradient buckets start all-reducing as they fill
  }
  if (reducer_) {
    SCAFFOLD_PROFILE_REGION(prof, "gradient_allreduce");
    reducer_->finish();
  }
  SCAFFOLD_PROFILE_REGION(prof, "step_and_update");
  torch::nn::utils::clip_grad_norm_(model_->parameters(), options_.grad_clip_norm);
  optimizer_->step();
  at::autocast::clear_cache();  // as leaving PyTorch's autocast context does
  const double b = static_cast<double>(image.size(0));
  return at::stack({terms.loss.detach() * b, terms.soft_dice.sum()});
}

Trainer::EpochSums Trainer::train_epoch(int64_t epoch, int64_t max_batches,
                                        std::vector<double>* step_times) {
  model_->train();
  auto indices = dataset::training_indices(static_cast<int64_t>(train_set_.size()), grid_.replicas(),
                                           grid_.replica(), options_.seed, epoch);
  const auto batch_size = options_.local_batch_size;
  if (max_batches >= 0)
    indices.resize(std::min<std::size_t>(indices.size(), static_cast<std::size_t>(max_batches * batch_size)));
  dataset::BatchLoader loader(train_set_, indices, static_cast<int>(batch_size),
                              options_.loader_workers, device_.is_cuda());
  at::Tensor sums = at::zeros({2}, at::TensorOptions().dtype(at::kDouble).device(device_));
  EpochSums out;
  dataset::Batch batch;
  // A progress line on a terminal (and a log line every 30 s elsewhere) for long epochs.
  core::Progress progress(epoch == 0 ? std::string("warm-up") : fmt::format("epoch {}", epoch),
                          loader.batches());
  SCAFFOLD_PROFILE_REGION(options_.profiler, "batch_loop");
  for (;;) {
    core::Stopwatch clock;
    if (!loader.next(&batch)) break;
    if (options_.profiler && epoch > 0) options_.profiler->step();  // timed batches only
    const double halo_before = dist::halo_stats().seconds;
    const double wait_before = reducer_ ? reducer_->wait_s() : 0.0;
    sums += train_step(batch).to(at::kDouble);
    synchronize(device_);
    if (options_.watchdog) options_.watchdog->beat();
    if (step_times) {
      step_times->push_back(clock.elapsed_s());
      comm_times_.halo_s += dist::halo_stats().seconds - halo_before;
      comm_times_.gradient_wait_s += (reducer_ ? reducer_->wait_s() : 0.0) - wait_before;
    }
    out.samples += static_cast<double>(batch.ids.size());
    ++out.steps;
    progress.add();
  }
  const at::Tensor host = sums.cpu();
  out.loss = host[0].item<double>();
  out.dice = host[1].item<double>();
  return out;
}

Trainer::EpochSums Trainer::validate(int64_t max_batches) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "evaluate");
  model_->eval();
  c10::InferenceMode no_grad;
  auto indices = dataset::validation_indices(static_cast<int64_t>(val_set_.size()), grid_.replicas(),
                                             grid_.replica());
  const auto batch_size = options_.local_batch_size;
  if (max_batches >= 0)
    indices.resize(std::min<std::size_t>(indices.size(), static_cast<std::size_t>(max_batches * batch_size)));
  dataset::BatchLoader loader(val_set_, indices, static_cast<int>(batch_size), options_.loader_workers,
                              device_.is_cuda());
  at::Tensor sums = at::zeros({2}, at::TensorOptions().dtype(at::kDouble).device(device_));
  EpochSums out;
  dataset::Batch batch;
  while (loader.next(&batch)) {
    const at::Tensor image = batch.image.to(device_, true);
    const at::Tensor mask = batch.mask.to(device_, true);
    at::Tensor logits;
    {
      model::AutocastGuard amp(forward_autocast(device_, options_.amp_bf16));
      logits = model_->forward(image);
    }
    const LossTerms terms = segmentation_loss(logits, mask, class_weights_tensor_, spatial_sum_);
    const at::Tensor hard = hard_dice_per_sample(logits, mask, options_.n_classes, spatial_sum_);
    const double b = static_cast<double>(image.size(0));
    sums += at::stack({terms.loss * b, hard.sum()}).to(at::kDouble);
    out.samples += b;
    ++out.steps;
    if (options_.watchdog) options_.watchdog->beat();
  }
  at::autocast::clear_cache();  // as leaving PyTorch's autocast context does
  model_->train();
  const at::Tensor host = sums.cpu();
  out.loss = host[0].item<double>();
  out.dice = host[1].item<double>();
  return out;
}

double Trainer::warmup() {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "warmup");
  core::Stopwatch clock;
  warmup_start_mono_s_ = core::monotonic_s();
  const std::string snapshot = serialize_state(*model_, *optimizer_, counters_);
  // train_epoch stops after min(warmup_batches, this replica's batches): the spec's
  // min(warmup_batches, len(train_loader)).
  if (options_.warmup_batches > 0) {
    warmup_steps_ = train_epoch(0, options_.warmup_batches, nullptr).steps;  // epoch-0 order
    validate(options_.warmup_batches);
  }
  // Undo every effect: a fresh optimiser, then the snapshot's parameters, state and RNG.
  optimizer_ = make_optimizer();
  counters_ = deserialize_state(snapshot, "warm-up snapshot", *model_, *optimizer_);
  comm_.barrier();
  warmup_end_mono_s_ = core::monotonic_s();
  return clock.elapsed_s();
}

void check_same_parameters(dist::Communicator& comm, const std::vector<at::Tensor>& params, const std::string& when,
                           bool* warned) {
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
    throw dist::AgreedError(fmt::format("the ranks' parameters differ {} (checksums {} to {}): gradient reduction "
                                        "is broken", when, low, high));
  if (spread > 0 && warned != nullptr && !*warned) {
    *warned = true;
    LOG_WARN("the ranks' parameters differ in the last bits {} (checksum spread {:.3g} relative): the MPI "
             "library's all-reduce is not bitwise identical on every rank", when, spread / scale);
  }
}

void Trainer::check_replicas_agree(int64_t epoch) {
  // Every rank applies the same reduced gradients to the same broadcast start.
  if (reducer_)
    check_same_parameters(comm_, model_->parameters(), fmt::format("after epoch {}", epoch), &warned_replica_drift_);
}

TrainCounters Trainer::resume(const fs::path& dir) {
  std::string errors;
  for (const char* name : {"checkpoint_last", "checkpoint_best"}) {
    const fs::path file = dir / name;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    try {
      optimizer_ = make_optimizer();
      counters_ = load_checkpoint(file, *model_, *optimizer_);
      LOG_INFO("resumed from {} (epoch {}, val_dice {:.4f}, {} optimizer steps)", file.string(),
               counters_.epoch, counters_.val_dice, counters_.total_optimizer_steps);
      return counters_;
    } catch (const core::Error& e) {
      LOG_WARN("{}; renaming it {}.corrupt", e.what(), file.filename().string());
      fs::rename(file, fs::path(file.string() + ".corrupt"), ec);
      errors += std::string("\n  ") + e.what();
    }
  }
  throw core::FileError(dir.string(), "no usable checkpoint_last or checkpoint_best to restart from" + errors);
}

void Trainer::save(const std::string& name) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "checkpoint");
  if (comm_.rank() == 0) save_checkpoint(options_.checkpoint_dir / name, *model_, *optimizer_, counters_);
}

TrainResult Trainer::run(const std::function<void(const EpochStats&)>& on_epoch) {
  SCAFFOLD_PROFILE_REGION(options_.profiler, "train");
  TrainResult result;
  result.total_optimizer_steps = counters_.total_optimizer_steps;
  int64_t epoch = counters_.epoch + 1;
  double dice = counters_.val_dice;
  set_learning_rate(learning_rate_after(counters_.epoch));
  bool saved_last_epoch = true;
  while (dice < options_.target_dice) {
    if (options_.epochs != -1 && epoch > options_.epochs) break;
    core::Stopwatch epoch_clock;
    const double start_mono_s = core::monotonic_s();
    std::vector<double> step_times;
    const EpochSums train = train_epoch(epoch, -1, &step_times);
    const double train_s = epoch_clock.elapsed_s();
    const double validation_start_mono_s = core::monotonic_s();
    const EpochSums val = validate(-1);
    // Metrics are summed over data-parallel replicas only (each replica counted once).
    double sums[6] = {train.loss, train.dice, train.samples, val.loss, val.dice, val.samples};
    comm_.allreduce_sum(sums, 6);
    for (double& s : sums) s /= static_cast<double>(grid_.spatial_size());
    EpochStats st;
    st.epoch = epoch;
    st.epoch_loss = sums[0];
    st.overall_loss = sums[0] / std::max(sums[2], 1.0);
    st.train_dice = sums[1] / std::max(sums[2], 1.0);
    st.val_loss_epoch = sums[3];
    st.val_loss_avg = sums[3] / std::max(sums[5], 1.0);
    st.val_dice = sums[4] / std::max(sums[5], 1.0);
    if (!std::isfinite(st.epoch_loss) || !std::isfinite(st.val_loss_epoch))
      throw core::Error(fmt::format("training diverged at epoch {}: training loss {}, validation loss {}",
                                    epoch, st.epoch_loss, st.val_loss_epoch));
    if (std::isnan(st.val_dice)) throw core::Error(fmt::format("validation Dice is NaN at epoch {}", epoch));
    st.next_lr = learning_rate_after(epoch);
    set_learning_rate(st.next_lr);
    st.duration_s = epoch_clock.elapsed_s();
    st.end_mono_s = core::monotonic_s();
    st.start_mono_s = start_mono_s;
    st.validation_start_mono_s = validation_start_mono_s;
    st.train_s = train_s;
    st.validation_s = st.duration_s - train_s;
    st.optimizer_steps = train.steps;
    counters_.total_optimizer_steps += train.steps;
    st.total_optimizer_steps = counters_.total_optimizer_steps;
    st.median_step_s = median(step_times);
    result.step_times_s.insert(result.step_times_s.end(), step_times.begin(), step_times.end());

    check_replicas_agree(epoch);
    counters_.epoch = epoch;
    counters_.val_dice = st.val_dice;
    counters_.val_loss_avg = st.val_loss_avg;
    const bool best = st.val_loss_avg < counters_.best_val_loss;
    if (best) counters_.best_val_loss = st.val_loss_avg;
    on_epoch(st);
    saved_last_epoch = false;
    if (options_.checkpoint_interval > 0 && epoch % options_.checkpoint_interval == 0) {
      save("checkpoint_last");
      if (best) save("checkpoint_best");
      saved_last_epoch = true;
    }
    dice = st.val_dice;
    ++result.epochs_run;
    ++epoch;
  }
  if (options_.checkpoint_interval > 0 && !saved_last_epoch) save("checkpoint_last");
  comm_.barrier();
  result.converged = dice >= options_.target_dice;
  result.last_epoch = counters_.epoch;
  result.total_optimizer_steps = counters_.total_optimizer_steps;
  result.final_val_dice = dice;
  return result;
}

}  // namespace scaffold::train
