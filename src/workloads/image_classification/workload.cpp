// `scaffold image_classification`: CARAML's image-classification benchmark
// (docs/image_classification.md) as the hooks of the suite's driver (suite/driver.hpp): layout
// (the global batch split over the ranks) -> data (synthetic or an image folder) -> model (ResNet,
// task, loop) -> timed training (warm-up epochs first, excluded by name) -> report
// (epoch_stats.csv, summary.json, CARAML's closing lines). Data parallel over every rank (each rank
// a replica, BatchNorm statistics per replica and rank 0's running statistics broadcast before
// each step, as DDP does); gradients reduced in buckets during backward.
#include "workloads/image_classification/workload.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "core/timer.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/cpu_kernel_key.hpp"
#include "kernels/fused_adam.hpp"
#include "nn/parameters.hpp"
#include "report/epoch_log.hpp"
#include "report/run_record.hpp"
#include "suite/driver.hpp"
#include "train/device.hpp"
#include "train/loop.hpp"
#include "workloads/image_classification/caraml_output.hpp"
#include "workloads/image_classification/image_folder.hpp"
#include "workloads/image_classification/memory_estimate.hpp"
#include "workloads/image_classification/metrics.hpp"
#include "workloads/image_classification/options.hpp"
#include "workloads/image_classification/resnet.hpp"
#include "workloads/image_classification/result_columns.hpp"
#include "workloads/image_classification/synthetic_images.hpp"
#include "workloads/image_classification/task.hpp"

namespace scaffold::imgcls {
namespace {
namespace fs = std::filesystem;
using config::ImageClassificationConfig;

using Args = cli::WorkloadArgs;

int depth_of(const std::string& model) {
  return std::stoi(model.substr(std::string("resnet").size()));
}

// The training and validation sources of the config.
struct Sources {
  std::unique_ptr<data::ExampleSource> train, val;
  const ImageFolder* folder_train = nullptr;  // for the skipped-image count
  const ImageFolder* folder_val = nullptr;
  int64_t num_classes = 0;
};

Sources make_sources(const ImageClassificationConfig& cfg) {
  Sources s;
  const auto seed = static_cast<uint64_t>(cfg.seed);
  if (cfg.dataset == "folder") {
    const fs::path root(cfg.data_dir);
    for (const char* split : {"train", "val"})
      if (!fs::is_directory(root / split))
        throw core::FileError(
            (root / split).string(),
            "data_dir must hold train/ and val/, each with one folder per class (as torchvision's "
            "ImageFolder)");
    ImageFolderOptions o;
    o.image_size = cfg.image_size;
    o.skip_bad = cfg.skip_bad_images;
    o.seed = seed;
    o.train = true;
    auto train = std::make_unique<ImageFolder>(root / "train", o);
    o.train = false;
    auto val = std::make_unique<ImageFolder>(root / "val", o);
    if (train->class_names() != val->class_names())
      throw core::FileError(
          root.string(), fmt::format("train/ has {} classes and val/ {}: both must hold the same "
                                     "class folders",
                                     train->num_classes(), val->num_classes()));
    if (static_cast<int64_t>(train->num_classes()) != cfg.num_classes)
      throw core::FileError(
          (root / "train").string(),
          fmt::format("holds {} class folders but num_classes is {}: set num_classes to {}",
                      train->num_classes(), cfg.num_classes, train->num_classes()));
    s.folder_train = train.get();
    s.folder_val = val.get();
    s.train = std::move(train);
    s.val = std::move(val);
  } else if (cfg.dataset == "synthetic_device") {
    s.train = std::make_unique<DeviceSyntheticLabels>(cfg.synthetic_train_images, cfg.num_classes,
                                                      seed, 0);
    s.val = std::make_unique<DeviceSyntheticLabels>(cfg.synthetic_val_images, cfg.num_classes, seed,
                                                    cfg.synthetic_train_images);
  } else {
    SyntheticImagesOptions o;
    o.image_size = cfg.image_size;
    o.num_classes = cfg.num_classes;
    o.seed = seed;
    o.separable = cfg.synthetic_separable;
    o.count = cfg.synthetic_train_images;
    o.offset = 0;
    s.train = std::make_unique<SyntheticImages>(o);
    o.count = cfg.synthetic_val_images;
    o.offset = cfg.synthetic_train_images;  // disjoint from the training images
    s.val = std::make_unique<SyntheticImages>(o);
  }
  s.num_classes = cfg.num_classes;
  return s;
}

// The local batch: the global batch split over the data-parallel ranks; an error unless it divides.
int64_t local_batch(dist::Communicator& comm, const ImageClassificationConfig& cfg) {
  int64_t local = 0;
  dist::run_agreed(comm, [&] {
    if (cfg.global_batch_size % comm.size() != 0)
      throw core::Error(fmt::format(
          "global_batch_size {} does not split over {} data-parallel ranks: use a multiple "
          "of {} (CARAML: batch per device = global batch / devices)",
          cfg.global_batch_size, comm.size(), comm.size()));
    local = cfg.global_batch_size / comm.size();
  });
  return local;
}

// One of CARAML's lines (caraml_output.hpp) on stdout, from rank 0 only (CARAML's print0); the
// logger writes to stderr.
void print0(const dist::Communicator& comm, const std::string& text) {
  if (comm.rank() != 0 || text.empty()) return;
  core::print_stdout_line(text.back() == '\n' ? text.substr(0, text.size() - 1) : text);
}

void log_epoch(const train::LoopEpoch& e, int64_t warmup_epochs, int64_t epochs) {
  const auto& v = e.metrics.values;  // ClassificationTask's order
  const double images_per_s =
      e.duration_s > 0 ? (e.train.samples + e.val.samples) / e.duration_s : 0.0;
  const double train_per_s = e.train_s > 0 ? e.train.samples / e.train_s : 0.0;
  const std::string which = e.warmup ? fmt::format("warm-up epoch {}/{}", e.epoch, warmup_epochs)
                                     : fmt::format("epoch {}/{}", e.epoch - warmup_epochs, epochs);
  LOG_INFO(
      "{}: train_loss {:.4f}, train_top1 {:.2f}%, val_loss {:.4f}, val_top1 {:.2f}%, "
      "val_top5 {:.2f}%, lr {:.4g} | {:.2f} s (train {:.2f} s, validation {:.2f} s) | "
      "Images/s {:.1f}, training images/s {:.1f}, median step {:.1f} ms",
      which, v[0].second, 100 * v[1].second, v[2].second, 100 * v[3].second, 100 * v[4].second,
      e.next_lr, e.duration_s, e.train_s, e.validation_s, images_per_s, train_per_s,
      e.median_step_s * 1e3);
}

// A run of the benchmark: the driver (suite/driver.hpp) calls these hooks in order.
class ImageClassificationRun : public suite::WorkloadRun {
 public:
  explicit ImageClassificationRun(const ImageClassificationConfig& cfg) : cfg_(cfg) {}

  void layout(suite::RunEnv& env) override { batch_ = local_batch(env.comm, cfg_); }
  core::MemoryEstimate memory_estimate(const suite::RunEnv&) const override {
    return imgcls_memory_estimate(cfg_, batch_);
  }

  void describe(suite::RunEnv& env, report::SystemInfo& info) override {
    train::apply_determinism(false);  // cuDNN autotuning on, as torchvision's reference trainer
    // TF32 as CARAML leaves it (or off with tf32: 0); recorded as set, and as "none" on a CPU.
    tf32_ = apply_tf32(cfg_.tf32, cfg_.precision, env.device);
    info.kernels = tf32_kernel_entries(tf32_);
    conv_.kernel = resolve_conv_kernel(cfg_.conv_kernel, cfg_.precision, env.device);
    info.kernels.push_back(std::string("conv3x3=") + to_string(conv_.kernel));
    conv_.use = std::make_shared<kernels::KernelUse>();
    conv_.register_choices();
    norm_.kernel =
        resolve_norm_kernel(cfg_.norm_kernel, cfg_.precision, env.device, cfg_.channels_last);
    info.kernels.push_back(std::string("bn_relu=") + to_string(norm_.kernel));
    norm_.use = conv_.use;  // one tally of what ran
    norm_.register_choices();
    // Refuses fused off the CPU here, before any data is made.
    fused_sgd_ =
        kernels::cpu_kernel_chosen("optimizer_kernel", cfg_.optimizer_kernel, "fused", env.device);
    info.kernels.push_back(std::string("optimizer=") + (fused_sgd_ ? "fused_sgd" : "libtorch"));
    print0(env.comm, env.device.is_cuda() ? fmt::format("Using {} GPU", info.gpu_model)
                                          : std::string("No GPUs Detected, using CPU"));
  }

  void prepare_data(suite::RunEnv& env) override {
    const double t0 = core::monotonic_s();
    dist::run_agreed(env.comm, [&] { sources_ = make_sources(cfg_); });
    print0(env.comm, caraml_datasets_line(core::monotonic_s() - t0));
    LOG_INFO(
        "data: {} ({} training, {} validation images, {} classes, {}x{}), global batch {} = {} "
        "rank(s) x {}",
        cfg_.dataset, sources_.train->size(), sources_.val->size(), sources_.num_classes,
        cfg_.image_size, cfg_.image_size, cfg_.global_batch_size, env.comm.size(), batch_);
  }

  void build(suite::RunEnv& env) override {
    mo_.depth = depth_of(cfg_.model);
    mo_.num_classes = cfg_.num_classes;
    mo_.zero_init_residual = cfg_.zero_init_residual;
    mo_.conv = conv_;
    mo_.norm = norm_;
    torch::manual_seed(
        static_cast<uint64_t>(cfg_.seed));  // identical initial weights (rank 0's broadcast too)
    ResNet net(mo_);
    params_ = nn::count_parameters(*net);
    ClassificationTaskOptions to;
    to.precision = cfg_.precision;
    to.channels_last = cfg_.channels_last;
    to.synthetic_device = cfg_.dataset == "synthetic_device";
    to.image_size = cfg_.image_size;
    to.profiler = &env.profiler;
    task_ =
        std::make_unique<ClassificationTask>(net, *sources_.train, *sources_.val, env.device, to);
    train::LoopOptions lo;
    lo.local_batch_size = batch_;
    lo.max_epochs = cfg_.epochs;
    lo.warmup_epochs = cfg_.warmup_epochs;
    lo.time_budget_s = cfg_.time_budget_s;
    const double lr = cfg_.learning_rate, momentum = cfg_.momentum, wd = cfg_.weight_decay,
                 gamma = cfg_.lr_gamma;
    const int step = cfg_.lr_step_size;
    lo.make_optimizer =
        [lr, momentum, wd, fused = fused_sgd_](
            const std::vector<at::Tensor>& p) -> std::unique_ptr<torch::optim::Optimizer> {
      const auto options = torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(wd);
      if (fused) return std::make_unique<kernels::FusedSGD>(p, options);
      return std::make_unique<torch::optim::SGD>(p, options);
    };
    // StepLR(step, gamma), stepped once per epoch (warm-up epochs included, as CARAML's loop does).
    lo.lr_after = [lr, gamma, step](int64_t done) {
      return lr * std::pow(gamma, static_cast<double>(done / step));
    };
    lo.checkpoint_interval = cfg_.checkpoint_interval;
    lo.checkpoint_dir = env.run_dir / cfg_.checkpoint_dir;
    lo.seed = static_cast<uint64_t>(cfg_.seed);
    lo.loader_workers = cfg_.dataloader_num_workers;
    lo.broadcast_buffers = true;
    lo.drop_last = true;  // a last partial training batch is skipped (BatchNorm needs > 1 example)
    // CARAML's GradScaler runs for fp16 and bf16 (init_scale 1, growth_interval 100).
    lo.loss_scaling = cfg_.precision == "fp16" || cfg_.precision == "bf16";
    lo.loss_scale_init = cfg_.loss_scale_init;
    lo.loss_scale_growth_interval = cfg_.loss_scale_growth_interval;
    lo.profiler = &env.profiler;
    train::LoopParallelism lp;
    if (env.comm.size() > 1) lp.world = dist::make_tensor_comm(env.comm, env.device);
    const dist::ProcessGrid grid(env.comm.size(), env.comm.rank(), {1, 1, 1},
                                 {2, 3, 4});  // data parallel only
    loop_ = std::make_unique<train::TrainingLoop>(*task_, std::move(lo), env.device, env.comm, grid,
                                                  std::move(lp));
    log_ = std::make_unique<report::EpochLog<EpochRow>>(env.run_dir / kEpochStatsFileName,
                                                        epoch_stats_columns());
  }

  void after_build(suite::RunEnv& env) override {
    forward_flops_ =
        static_cast<double>(resnet_forward_flops(mo_, cfg_.image_size, cfg_.image_size));
    LOG_INFO(
        "model: {}, {} parameters ({:.1f} MB fp32), {:.4g} GFLOP per image forward, {}{}, TF32 "
        "{}, on {} with {} thread(s); SGD lr {}, momentum {}, weight decay {}{}",
        cfg_.model, params_, static_cast<double>(params_) * 4 / 1e6, forward_flops_ / 1e9,
        cfg_.precision, cfg_.channels_last ? ", channels-last" : "", tf32_.effect(),
        env.device.str(), env.threads, cfg_.learning_rate, cfg_.momentum, cfg_.weight_decay,
        cfg_.precision == "fp16" || cfg_.precision == "bf16"
            ? fmt::format("; loss scale {} doubling every {} good steps", cfg_.loss_scale_init,
                          cfg_.loss_scale_growth_interval)
            : std::string());
    print0(env.comm, caraml_starting_line(
                         static_cast<int64_t>(sources_.train->size() + sources_.val->size())));
  }

  train::TrainingLoop* loop() override { return loop_.get(); }

  void resume_rows(suite::RunEnv&, const train::TrainCounters& start) override {
    log_->resume([&](const EpochRow& r) { return r.epoch <= start.epoch; });
  }

  void before_training(suite::RunEnv& env) override {
    if (loop_->counters().epoch < cfg_.warmup_epochs) print0(env.comm, caraml_warmup_start_line());
  }

  void on_epoch(suite::RunEnv& env, const train::LoopEpoch& e) override {
    log_epoch(e, cfg_.warmup_epochs, cfg_.epochs);
    if (e.warmup && warmup_t0_ < 0) warmup_t0_ = e.start_mono_s;
    if (e.warmup && e.epoch == cfg_.warmup_epochs)
      print0(env.comm, caraml_warmup_end_line(e.end_mono_s - warmup_t0_));
    if (env.comm.rank() != 0) return;
    EpochRow r;
    r.epoch = e.epoch;
    r.warmup = e.warmup;
    const auto& v = e.metrics.values;
    r.train_loss = v[0].second;
    r.train_top1 = v[1].second;
    r.val_loss = v[2].second;
    r.val_top1 = v[3].second;
    r.val_top5 = v[4].second;
    r.lr = loop_->optimizer().param_groups()[0].options().get_lr();
    r.duration_s = e.duration_s;
    r.train_s = e.train_s;
    r.validation_s = e.validation_s;
    r.train_images = static_cast<int64_t>(std::llround(e.train.samples));
    r.val_images = static_cast<int64_t>(std::llround(e.val.samples));
    r.median_step_s = e.median_step_s;
    log_->append(r);
  }

  bool finish(suite::RunEnv&, const train::LoopResult& result, const suite::EnergyResult& energy,
              report::RunRecord& rec) override {
    const auto& rows = log_->rows();
    rec.global_batch = cfg_.global_batch_size;
    rec.local_batch = batch_;
    rec.precision = cfg_.precision;
    rec.warmup_epochs = cfg_.warmup_epochs;
    rec.params = {{"model", cfg_.model},
                  {"dataset", cfg_.dataset},
                  {std::string(kParamTf32), cfg_.tf32 ? "1" : "0"},
                  {std::string(kParamTf32Effect), tf32_.effect()}};
    if (std::none_of(rows.begin(), rows.end(), [](const EpochRow& r) { return !r.warmup; }))
      return false;
    const std::optional<double> wh = energy.sum_wh({"train", "validation"});
    f_ = image_classification_figures(rows, forward_flops_, wh);
    rec.epochs = f_.timed_epochs;
    rec.time_s = f_.time_s;
    rec.energy_wh = wh;
    const std::size_t skipped = (sources_.folder_train ? sources_.folder_train->skipped() : 0) +
                                (sources_.folder_val ? sources_.folder_val->skipped() : 0);
    rec.params = {{"model", cfg_.model},
                  {"dataset", cfg_.dataset},
                  {"image_size", std::to_string(cfg_.image_size)},
                  {"num_classes", std::to_string(cfg_.num_classes)},
                  {"workers", std::to_string(cfg_.dataloader_num_workers)},
                  {"channels_last", cfg_.channels_last ? "1" : "0"},
                  {"conv_kernel", to_string(conv_.kernel)},
                  {"norm_kernel", to_string(norm_.kernel)},
                  {"optimizer_kernel", fused_sgd_ ? "fused" : "libtorch"},
                  {std::string(kParamTf32), cfg_.tf32 ? "1" : "0"},
                  {std::string(kParamTf32Effect), tf32_.effect()},
                  {"momentum", fmt::format("{}", cfg_.momentum)},
                  {"weight_decay", fmt::format("{}", cfg_.weight_decay)},
                  {"optimizer", "SGD"},
                  {"skipped_images", std::to_string(skipped)}};
    rec.counters = {
        {"images_per_s", f_.images_per_s.mean, "images/s",
         "CARAML's Average Images/s: mean over timed epochs of (train + val images) / epoch time"},
        {"images_per_s_median", f_.images_per_s.median, "images/s", "median over timed epochs"},
        {"images_per_s_min", f_.images_per_s.min, "images/s", "slowest timed epoch"},
        {"images_per_s_max", f_.images_per_s.max, "images/s", "fastest timed epoch"},
        {"train_images_per_s", f_.train_images_per_s.median, "images/s",
         "median over timed epochs of training images / training time"},
        {"val_top1", f_.val_top1, "", "top-1 validation accuracy of the last epoch (fraction)"},
        {"val_top5", f_.val_top5, "", "top-5 validation accuracy of the last epoch (fraction)"},
        {"parameters", static_cast<double>(params_), "", "trainable parameters"},
        {"forward_flop_per_image", forward_flops_, "FLOP",
         "convolutions and the classifier, 2 per multiply-add"},
        {"achieved_flop_per_s", f_.achieved_flop_per_s, "FLOP/s",
         "(3 x training + validation images) x forward FLOPs / timed time"},
        {"median_step_s", core::median(result.step_times_s), "s",
         "median timed training step on rank 0"},
        {"skipped_steps", static_cast<double>(result.skipped_steps), "",
         "steps the fp16 loss scaler skipped"}};
    if (f_.images_per_wh) {
      rec.counters.push_back(
          {"images_per_wh", *f_.images_per_wh, "images/Wh", "timed images / timed energy"});
      rec.counters.push_back(
          {"j_per_image", *f_.j_per_image, "J/image", "timed energy / timed images"});
    }
    LOG_INFO(
        "image_classification: {} timed epochs in {:.2f} s after {} warm-up epoch(s); val_top1 "
        "{:.2f}%, val_top5 {:.2f}%",
        f_.timed_epochs, f_.time_s, cfg_.warmup_epochs, 100 * f_.val_top1, 100 * f_.val_top5);
    LOG_INFO(
        "Images/s over timed epochs: mean {:.1f}, median {:.1f}, min {:.1f}, max {:.1f}; "
        "training images/s median {:.1f}; {:.4g} GFLOP/s achieved",
        f_.images_per_s.mean, f_.images_per_s.median, f_.images_per_s.min, f_.images_per_s.max,
        f_.train_images_per_s.median, f_.achieved_flop_per_s / 1e9);
    if (f_.images_per_wh)
      LOG_INFO("energy of the timed epochs: {:.4g} Wh, {:.4g} images/Wh, {:.4g} J/image", *wh,
               *f_.images_per_wh, *f_.j_per_image);
    if (skipped > 0) LOG_WARN("{} unreadable image(s) were skipped (skip_bad_images)", skipped);
    return true;
  }

  // What rank 0's 3x3 convolutions and BatchNorm + ReLU pairs ran, counted call by call (the probes
  // behind the choice are kernels::probe_verdicts()'s lines, which the driver adds).
  void describe_after_training(report::SystemInfo& info) override {
    info.kernels_run = conv_.use->summary();
    for (std::string& line : conv_.use->fallbacks())
      info.kernel_fallbacks.push_back(std::move(line));
  }

  void closing_lines(suite::RunEnv& env, const train::LoopResult&) override {
    // CARAML's closing lines on stdout; its JUBE pattern parses the last one.
    print0(env.comm, caraml_training_line(f_.timed_epochs, f_.time_s));
    print0(env.comm, caraml_grid_table(log_->rows()));
    print0(env.comm, caraml_average_line(f_.images_per_s.mean));
  }

 private:
  ImageClassificationConfig cfg_;
  int64_t batch_ = 0;
  Tf32State tf32_;
  ConvChoice conv_;         // the 3x3 convolutions' kernel and the tally of what ran
  NormChoice norm_;         // the BatchNorm + ReLU pairs' kernel (same tally)
  bool fused_sgd_ = false;  // optimizer_kernel resolved: kernels::FusedSGD
  Sources sources_;
  ResNetOptions mo_;
  int64_t params_ = 0;
  double forward_flops_ = 0.0;
  std::unique_ptr<ClassificationTask> task_;
  std::unique_ptr<train::TrainingLoop> loop_;
  std::unique_ptr<report::EpochLog<EpochRow>> log_;
  double warmup_t0_ = -1.0;  // the first warm-up epoch's start, for CARAML's warm-up time
  ImageClassificationFigures f_;
};

std::unique_ptr<suite::WorkloadRun> start(const ImageClassificationConfig& cfg, const Args&) {
  return std::make_unique<ImageClassificationRun>(cfg);
}

}  // namespace

suite::Workload image_classification_workload() {
  return suite::make_workload<ImageClassificationConfig>(
      kWorkloadName,
      "CARAML's image-classification benchmark: ResNet training on synthetic or folder "
      "images, images/s and energy",
      start, result_table());
}

}  // namespace scaffold::imgcls
