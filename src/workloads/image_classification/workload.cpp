// `scaffold image_classification`: CARAML's image-classification benchmark
// (docs/image_classification.md) as a phase-structured driver: init (config, run folder, context)
// -> data (synthetic or an image folder) -> model (ResNet, task, loop) -> timed training (warm-up
// epochs first, excluded by name) -> report (epoch_stats.csv, summary.json, the final lines). Data
// parallel over every rank (each rank a replica, BatchNorm statistics per replica and rank 0's
// running statistics broadcast before each step, as DDP does); gradients reduced in buckets during
// backward.
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

#include "cli/common.hpp"
#include "cli/energy_meter.hpp"
#include "config/image_classification_options.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "model/unet.hpp"
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
#include "workloads/image_classification/caraml_output.hpp"
#include "workloads/image_classification/image_folder.hpp"
#include "workloads/image_classification/memory_estimate.hpp"
#include "workloads/image_classification/metrics.hpp"
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
  std::unique_ptr<dataset::ExampleSource> train, val;
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

int run(cli::RunContext& ctx, const Args& args) {
  at::set_num_threads(ctx.threads);
  const profile::ProfileOptions profile_options = profile::profile_options_from_env();
  profile::Profiler profiler(profile::profiles_this_rank(profile_options, ctx.comm.local_rank()),
                             profile_options.schedule);
  suite::PhaseDriver phases(&profiler);
  suite::install_stop_signals(ctx.stop_signals);

  // init: config, layout, run folder, context.
  const ImageClassificationConfig cfg =
      cli::load_config_everywhere_as<ImageClassificationConfig>(ctx.comm, args.config);
  const int64_t batch = local_batch(ctx.comm, cfg);
  const dist::ProcessGrid grid(ctx.comm.size(), ctx.comm.rank(), {1, 1, 1},
                               {2, 3, 4});  // data parallel only
  const train::DeviceChoice device_choice =
      train::select_device(cfg.device, cfg.device_sharing, ctx.comm);
  const c10::Device device = device_choice.device;
  dist::run_agreed(ctx.comm, [&] {
    train::check_memory_budget_on(kWorkloadName, imgcls_memory_estimate(cfg, batch), device,
                                  ctx.comm.local_size(), cfg.device_sharing);
  });
  const fs::path run_dir = suite::prepare_run_folder(
      ctx.comm, suite::run_folder_request(cfg, args.config.files, args.config.given_flags(),
                                          args.run_dir, args.argv));
  std::optional<suite::SetupGuard> setup_guard(std::in_place, ctx.comm, run_dir,
                                               !args.run_dir.empty());
  LOG_INFO("image_classification: run folder {}", run_dir.string());
  train::apply_determinism(false);  // cuDNN autotuning on, as torchvision's reference trainer
  // TF32 as CARAML leaves it (or off with tf32: 0); recorded as set, and as "none" on a CPU.
  const Tf32State tf32 = apply_tf32(cfg.tf32, cfg.precision, device);
  {
    report::SystemInfo info;
    info.gpu_model = train::device_model_name(device);
    info.device = device.str();
    info.rank_devices = device_choice.rank_devices;
    info.threads = ctx.threads;
    info.kernels = tf32_kernel_entries(tf32);
    suite::write_run_context(ctx.comm, run_dir, info);
  }

  print0(ctx.comm, device.is_cuda() ? fmt::format("Using {} GPU", train::device_model_name(device))
                                    : std::string("No GPUs Detected, using CPU"));

  // data
  Sources sources;
  const double data_t0 = core::monotonic_s();
  phases.run("data", [&] { dist::run_agreed(ctx.comm, [&] { sources = make_sources(cfg); }); });
  print0(ctx.comm, caraml_datasets_line(core::monotonic_s() - data_t0));
  LOG_INFO(
      "data: {} ({} training, {} validation images, {} classes, {}x{}), global batch {} = {} "
      "rank(s) x {}",
      cfg.dataset, sources.train->size(), sources.val->size(), sources.num_classes, cfg.image_size,
      cfg.image_size, cfg.global_batch_size, ctx.comm.size(), batch);

  // model
  ResNetOptions mo;
  mo.depth = depth_of(cfg.model);
  mo.num_classes = cfg.num_classes;
  mo.zero_init_residual = cfg.zero_init_residual;
  std::unique_ptr<ClassificationTask> task;
  std::unique_ptr<train::TrainingLoop> loop;
  int64_t params = 0;
  phases.run("init_model", [&] {
    torch::manual_seed(
        static_cast<uint64_t>(cfg.seed));  // identical initial weights (rank 0's broadcast too)
    ResNet net(mo);
    params = model::count_parameters(*net);
    ClassificationTaskOptions to;
    to.precision = cfg.precision;
    to.channels_last = cfg.channels_last;
    to.synthetic_device = cfg.dataset == "synthetic_device";
    to.image_size = cfg.image_size;
    to.profiler = &profiler;
    task = std::make_unique<ClassificationTask>(net, *sources.train, *sources.val, device, to);
    train::LoopOptions lo;
    lo.local_batch_size = batch;
    lo.max_epochs = cfg.epochs;
    lo.warmup_epochs = cfg.warmup_epochs;
    lo.time_budget_s = cfg.time_budget_s;
    const double lr = cfg.learning_rate, momentum = cfg.momentum, wd = cfg.weight_decay,
                 gamma = cfg.lr_gamma;
    const int step = cfg.lr_step_size;
    lo.make_optimizer =
        [lr, momentum,
         wd](const std::vector<at::Tensor>& p) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<torch::optim::SGD>(
          p, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(wd));
    };
    // StepLR(step, gamma), stepped once per epoch (warm-up epochs included, as CARAML's loop does).
    lo.lr_after = [lr, gamma, step](int64_t done) {
      return lr * std::pow(gamma, static_cast<double>(done / step));
    };
    lo.checkpoint_interval = cfg.checkpoint_interval;
    lo.checkpoint_dir = run_dir / cfg.checkpoint_dir;
    lo.seed = static_cast<uint64_t>(cfg.seed);
    lo.loader_workers = cfg.dataloader_num_workers;
    lo.broadcast_buffers = true;
    lo.drop_last = true;  // a last partial training batch is skipped (BatchNorm needs > 1 example)
    // CARAML's GradScaler runs for fp16 and bf16 (init_scale 1, growth_interval 100).
    lo.loss_scaling = cfg.precision == "fp16" || cfg.precision == "bf16";
    lo.loss_scale_init = cfg.loss_scale_init;
    lo.loss_scale_growth_interval = cfg.loss_scale_growth_interval;
    lo.profiler = &profiler;
    train::LoopParallelism lp;
    if (ctx.comm.size() > 1) lp.world = dist::make_tensor_comm(ctx.comm, device);
    loop = std::make_unique<train::TrainingLoop>(*task, std::move(lo), device, ctx.comm, grid,
                                                 std::move(lp));
  });
  const double forward_flops =
      static_cast<double>(resnet_forward_flops(mo, cfg.image_size, cfg.image_size));
  LOG_INFO(
      "model: {}, {} parameters ({:.1f} MB fp32), {:.4g} GFLOP per image forward, {}{}, TF32 {}, "
      "on {} "
      "with {} thread(s); SGD lr {}, momentum {}, weight decay {}{}",
      cfg.model, params, static_cast<double>(params) * 4 / 1e6, forward_flops / 1e9, cfg.precision,
      cfg.channels_last ? ", channels-last" : "", tf32.effect(), device.str(), ctx.threads,
      cfg.learning_rate, cfg.momentum, cfg.weight_decay,
      cfg.precision == "fp16" || cfg.precision == "bf16"
          ? fmt::format("; loss scale {} doubling every {} good steps", cfg.loss_scale_init,
                        cfg.loss_scale_growth_interval)
          : std::string());

  print0(ctx.comm,
         caraml_starting_line(static_cast<int64_t>(sources.train->size() + sources.val->size())));
  std::unique_ptr<core::Watchdog> watchdog =
      suite::progress_watchdog(ctx.comm, cfg.progress_timeout_s);
  loop->set_watchdog(&*watchdog);
  cli::EnergyMeter energy(ctx.comm);
  phases.set_energy_meter(&energy);

  train::TrainCounters start;
  if (!args.run_dir.empty()) start = loop->resume(run_dir / cfg.checkpoint_dir);
  std::vector<EpochRow> rows;
  const fs::path stats_file = run_dir / kEpochStatsFileName;
  if (ctx.comm.rank() == 0 && !args.run_dir.empty() && fs::exists(stats_file))
    for (const EpochRow& r : read_epoch_stats(stats_file))
      if (r.epoch <= start.epoch) rows.push_back(r);
  const auto write_rows = [&] {
    std::string text = epoch_stats_header() + "\n";
    for (const EpochRow& r : rows) text += epoch_stats_line(r) + "\n";
    core::write_file_atomic(stats_file, text);
  };

  setup_guard.reset();  // training starts: the folder stays whatever happens now
  if (start.epoch < cfg.warmup_epochs) print0(ctx.comm, caraml_warmup_start_line());
  double warmup_t0 = -1.0;  // the first warm-up epoch's start, for CARAML's warm-up time
  const train::LoopResult result = phases.run("training", [&] {
    return loop->run([&](const train::LoopEpoch& e) {
      log_epoch(e, cfg.warmup_epochs, cfg.epochs);
      if (e.warmup && warmup_t0 < 0) warmup_t0 = e.start_mono_s;
      if (e.warmup && e.epoch == cfg.warmup_epochs)
        print0(ctx.comm, caraml_warmup_end_line(e.end_mono_s - warmup_t0));
      energy.add_window(e.warmup ? "warmup" : "train", e.epoch, e.start_mono_s,
                        e.validation_start_mono_s);
      if (!e.warmup)
        energy.add_window("validation", e.epoch, e.validation_start_mono_s, e.end_mono_s);
      if (ctx.comm.rank() != 0) return;
      EpochRow r;
      r.epoch = e.epoch;
      r.warmup = e.warmup;
      const auto& v = e.metrics.values;
      r.train_loss = v[0].second;
      r.train_top1 = v[1].second;
      r.val_loss = v[2].second;
      r.val_top1 = v[3].second;
      r.val_top5 = v[4].second;
      r.lr = loop->optimizer().param_groups()[0].options().get_lr();
      r.duration_s = e.duration_s;
      r.train_s = e.train_s;
      r.validation_s = e.validation_s;
      r.train_images = static_cast<int64_t>(std::llround(e.train.samples));
      r.val_images = static_cast<int64_t>(std::llround(e.val.samples));
      r.median_step_s = e.median_step_s;
      rows.push_back(r);
      write_rows();
    });
  });
  loop->set_watchdog(nullptr);
  watchdog.reset();
  phases.set_energy_meter(nullptr);
  const auto energy_rows = energy.finish(run_dir, start.epoch + 1);
  profiler.finish();

  const bool any_timed =
      std::any_of(rows.begin(), rows.end(), [](const EpochRow& r) { return !r.warmup; });
  if (ctx.comm.rank() == 0 && !any_timed) {
    // Stopped before the first timed epoch ended: nothing to report but the reason.
    LOG_WARN("stopped by {} before any timed epoch finished: no figures; {} resumes the run",
             suite::signal_name(result.stop_signal), (run_dir / "restart.sh").string());
    report::RunRecord rec =
        suite::base_record("image_classification", run_dir, ctx.comm, ctx.threads, device.str());
    rec.status = report::kStatusTimeLimit;
    rec.global_batch = cfg.global_batch_size;
    rec.local_batch = batch;
    rec.precision = cfg.precision;
    rec.warmup_epochs = cfg.warmup_epochs;
    for (const auto& p : phases.phases()) rec.runtime_s += p.seconds;
    rec.params = {{"model", cfg.model},
                  {"dataset", cfg.dataset},
                  {std::string(kParamTf32), cfg.tf32 ? "1" : "0"},
                  {std::string(kParamTf32Effect), tf32.effect()}};
    report::write_summary_json(run_dir, rec);
  }
  if (ctx.comm.rank() == 0 && any_timed) {
    std::optional<double> wh;
    if (energy.active()) {
      double sum = 0.0;
      for (const auto& w : energy_rows)
        if (w.window == "train" || w.window == "validation") sum += w.energy_wh;
      wh = sum;
    }
    const ImageClassificationFigures f = image_classification_figures(rows, forward_flops, wh);
    report::RunRecord rec =
        suite::base_record("image_classification", run_dir, ctx.comm, ctx.threads, device.str());
    rec.status = result.stopped ? report::kStatusTimeLimit : report::kStatusCompleted;
    rec.global_batch = cfg.global_batch_size;
    rec.local_batch = batch;
    rec.precision = cfg.precision;
    rec.epochs = f.timed_epochs;
    rec.warmup_epochs = cfg.warmup_epochs;
    rec.time_s = f.time_s;
    for (const auto& p : phases.phases()) rec.runtime_s += p.seconds;
    rec.energy_wh = wh;
    const std::size_t skipped = (sources.folder_train ? sources.folder_train->skipped() : 0) +
                                (sources.folder_val ? sources.folder_val->skipped() : 0);
    rec.params = {{"model", cfg.model},
                  {"dataset", cfg.dataset},
                  {"image_size", std::to_string(cfg.image_size)},
                  {"num_classes", std::to_string(cfg.num_classes)},
                  {"workers", std::to_string(cfg.dataloader_num_workers)},
                  {"channels_last", cfg.channels_last ? "1" : "0"},
                  {std::string(kParamTf32), cfg.tf32 ? "1" : "0"},
                  {std::string(kParamTf32Effect), tf32.effect()},
                  {"momentum", fmt::format("{}", cfg.momentum)},
                  {"weight_decay", fmt::format("{}", cfg.weight_decay)},
                  {"optimizer", "SGD"},
                  {"skipped_images", std::to_string(skipped)}};
    rec.counters = {
        {"images_per_s", f.images_per_s.mean, "images/s",
         "CARAML's Average Images/s: mean over timed epochs of (train + val images) / epoch time"},
        {"images_per_s_median", f.images_per_s.median, "images/s", "median over timed epochs"},
        {"images_per_s_min", f.images_per_s.min, "images/s", "slowest timed epoch"},
        {"images_per_s_max", f.images_per_s.max, "images/s", "fastest timed epoch"},
        {"train_images_per_s", f.train_images_per_s.median, "images/s",
         "median over timed epochs of training images / training time"},
        {"val_top1", f.val_top1, "", "top-1 validation accuracy of the last epoch (fraction)"},
        {"val_top5", f.val_top5, "", "top-5 validation accuracy of the last epoch (fraction)"},
        {"parameters", static_cast<double>(params), "", "trainable parameters"},
        {"forward_flop_per_image", forward_flops, "FLOP",
         "convolutions and the classifier, 2 per multiply-add"},
        {"achieved_flop_per_s", f.achieved_flop_per_s, "FLOP/s",
         "(3 x training + validation images) x forward FLOPs / timed time"},
        {"median_step_s", core::median(result.step_times_s), "s",
         "median timed training step on rank 0"},
        {"skipped_steps", static_cast<double>(result.skipped_steps), "",
         "steps the fp16 loss scaler skipped"}};
    if (f.images_per_wh) {
      rec.counters.push_back(
          {"images_per_wh", *f.images_per_wh, "images/Wh", "timed images / timed energy"});
      rec.counters.push_back(
          {"j_per_image", *f.j_per_image, "J/image", "timed energy / timed images"});
    }
    report::write_summary_json(run_dir, rec);
    LOG_INFO(
        "image_classification: {} timed epochs in {:.2f} s after {} warm-up epoch(s); val_top1 "
        "{:.2f}%, "
        "val_top5 {:.2f}%",
        f.timed_epochs, f.time_s, cfg.warmup_epochs, 100 * f.val_top1, 100 * f.val_top5);
    LOG_INFO(
        "Images/s over timed epochs: mean {:.1f}, median {:.1f}, min {:.1f}, max {:.1f}; training "
        "images/s "
        "median {:.1f}; {:.4g} GFLOP/s achieved",
        f.images_per_s.mean, f.images_per_s.median, f.images_per_s.min, f.images_per_s.max,
        f.train_images_per_s.median, f.achieved_flop_per_s / 1e9);
    if (f.images_per_wh)
      LOG_INFO("energy of the timed epochs: {:.4g} Wh, {:.4g} images/Wh, {:.4g} J/image", *wh,
               *f.images_per_wh, *f.j_per_image);
    if (skipped > 0) LOG_WARN("{} unreadable image(s) were skipped (skip_bad_images)", skipped);
    const int64_t peak = train::device_peak_allocated_bytes(device);
    LOG_INFO("peak memory: process RSS {:.2f} GiB{}; phase wall times: {}",
             static_cast<double>(core::peak_rss_bytes()) / (1 << 30),
             peak >= 0 ? fmt::format(", {} allocated {:.2f} GiB", device.str(),
                                     static_cast<double>(peak) / (1 << 30))
                       : std::string(),
             phases.summary());
    if (result.stopped)
      LOG_WARN(
          "stopped by {} after epoch {}: the files are complete up to that epoch; {} resumes the "
          "run",
          suite::signal_name(result.stop_signal), result.last_epoch,
          (run_dir / "restart.sh").string());
    // CARAML's closing lines on stdout; its JUBE pattern parses the last one.
    print0(ctx.comm, caraml_training_line(f.timed_epochs, f.time_s));
    print0(ctx.comm, caraml_grid_table(rows));
    print0(ctx.comm, caraml_average_line(f.images_per_s.mean));
  }
  return result.stopped ? suite::kExitStoppedBySignal : 0;
}

}  // namespace

cli::Subcommand add_image_classification(CLI::App& app, int argc, char** argv) {
  return cli::add_workload_subcommand<ImageClassificationConfig>(
      app, "image_classification",
      "CARAML's image-classification benchmark: ResNet training on synthetic or folder "
      "images, images/s and energy",
      argc, argv, run);
}

}  // namespace scaffold::imgcls
