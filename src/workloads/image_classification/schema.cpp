// ImageClassificationConfig's schema table: every key with its kind, help, allowed values and
// range checks, in image_classification_options.hpp order. The scalar rules are the ones every
// struct shares (schema_rules.cpp), so files and flags read exactly as for `scaffold benchmark`.
// No auxiliary or renamed keys: this struct has no older format to stay compatible with.
#include <string>
#include <vector>

#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "workloads/image_classification/options.hpp"

namespace scaffold::config {
namespace {

using IC = ImageClassificationConfig;
using Spec = KeySpecT<IC>;
using rules::at_least_0;
using rules::at_least_1;
using rules::bind_key;
using rules::bind_path;
using rules::bool_any;
using rules::kBoolAllowed;
using rules::non_empty;

std::vector<Spec> image_classification_keys() {
  std::vector<Spec> t;
  const auto add = [&t](Spec spec) {
    t.push_back(std::move(spec));
    return t.size() - 1;
  };
  const auto add_choice = [&t](Spec spec, std::vector<std::string> choices) {
    spec.choices = std::move(choices);
    t.push_back(std::move(spec));
  };

  // Paths.
  add(rules::base_run_dir_key<IC>());
  add(rules::job_name_key<IC>());
  add(rules::checkpoint_dir_key<IC>());
  {
    const auto i = add(bind_path(
        "data_dir", &IC::data_dir,
        "dataset folder: root of an image folder with train/ and val/ subfolders, one subfolder "
        "per class",
        "a path; required when dataset is folder"));
    t[i].depends_on = {"dataset"};
    t[i].cross_check = [](const IC& c) {
      return c.dataset != "folder" || !c.data_dir.empty()
                 ? std::string()
                 : std::string(
                       "a non-empty path when dataset is folder: the root holding train/ "
                       "and val/");
    };
  }

  add(rules::seed_key<IC>());

  // Model and data.
  add_choice(bind_key("model", &IC::model, "torchvision ResNet variant",
                      "one of resnet18, resnet34, resnet50, resnet101, resnet152"),
             {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"});
  add(bind_key(
      "num_classes", &IC::num_classes, "classes (outputs of the classifier)", "an integer >= 2",
      +[](const int& v) { return v >= 2; }));
  add(bind_key(
      "image_size", &IC::image_size, "side of the square input images, pixels",
      // 32: the ResNet stem and four stages halve the side five times, leaving 1x1.
      "an integer in [32, 1024]", +[](const int& v) { return v >= 32 && v <= 1024; }));
  add_choice(bind_key("dataset", &IC::dataset,
                      "synthetic: random images made on the host (CARAML's FakeData); "
                      "synthetic_device: made on the training device; folder: images in data_dir",
                      "one of synthetic, synthetic_device, folder"),
             {"synthetic", "synthetic_device", "folder"});
  add(bind_key("synthetic_train_images", &IC::synthetic_train_images,
               "training images of a synthetic dataset (CARAML: 9000)", "an integer >= 1",
               at_least_1));
  add(bind_key("synthetic_val_images", &IC::synthetic_val_images,
               "validation images of a synthetic dataset (CARAML: 1000)", "an integer >= 1",
               at_least_1));
  add(bind_key("synthetic_separable", &IC::synthetic_separable,
               "1 adds a class-dependent signal to synthetic images so a small model can learn "
               "(CARAML's FakeData has none)",
               kBoolAllowed, bool_any));
  add(bind_key("skip_bad_images", &IC::skip_bad_images,
               "1 skips unreadable images of a folder dataset instead of failing", kBoolAllowed,
               bool_any));

  // Training.
  add(bind_key("global_batch_size", &IC::global_batch_size,
               "images per optimizer step, split evenly over the data-parallel ranks",
               "an integer >= 1", at_least_1));
  add(bind_key("epochs", &IC::epochs, "timed epochs", "an integer >= 1", at_least_1));
  add(bind_key("warmup_epochs", &IC::warmup_epochs,
               "epochs trained (train + validation) before the timed ones, excluded from every "
               "figure (CARAML: 5)",
               "an integer >= 0", at_least_0));
  add(bind_key(
      "time_budget_s", &IC::time_budget_s,
      "stop after the epoch in which the timed training time passes this many seconds; 0: none",
      "a number >= 0", +[](const double& v) { return v >= 0.0; }));
  add_choice(
      bind_key("optimizer", &IC::optimizer, "optimizer", "SGD, in any case: the only one so far"),
      {"SGD"});
  add(bind_key(
      "learning_rate", &IC::learning_rate, "initial learning rate", "a number > 0",
      +[](const double& v) { return v > 0.0; }));
  add(bind_key(
      "momentum", &IC::momentum, "SGD momentum", "a number in [0, 1)",
      +[](const double& v) { return v >= 0.0 && v < 1.0; }));
  add(bind_key(
      "weight_decay", &IC::weight_decay, "L2 weight decay", "a number >= 0",
      +[](const double& v) { return v >= 0.0; }));
  add(bind_key("lr_step_size", &IC::lr_step_size, "StepLR: epochs between learning-rate decays",
               "an integer >= 1", at_least_1));
  add(bind_key(
      "lr_gamma", &IC::lr_gamma, "StepLR: factor applied to the learning rate at each decay",
      "a number in (0, 1]", +[](const double& v) { return v > 0.0 && v <= 1.0; }));
  add_choice(bind_key("precision", &IC::precision,
                      "numeric precision: fp32; bf16 autocast with loss scaling; tf32 matmuls "
                      "and convolutions (CUDA only); fp16 autocast with loss scaling (CUDA only)",
                      "one of fp32, bf16, tf32, fp16"),
             {"fp32", "bf16", "tf32", "fp16"});
  {
    const auto i = add(bind_key("tf32", &IC::tf32,
                                "CUDA: 1 keeps PyTorch's TF32 defaults as CARAML does (cuDNN "
                                "convolutions may use TF32, cuBLAS matmuls only with precision "
                                "tf32); 0 turns TF32 off for both; no effect on a CPU",
                                kBoolAllowed, bool_any));
    t[i].depends_on = {"precision"};
    t[i].cross_check = [](const IC& c) {
      return c.tf32 || c.precision != "tf32"
                 ? std::string()
                 : std::string("1 when precision is tf32 (tf32: 0 turns TF32 off)");
    };
  }
  add(bind_key(
      "loss_scale_init", &IC::loss_scale_init,
      "fp16 and bf16: the initial dynamic loss scale (CARAML's GradScaler init_scale)",
      "a number > 0", +[](const double& v) { return v > 0.0; }));
  add(bind_key("loss_scale_growth_interval", &IC::loss_scale_growth_interval,
               "fp16 and bf16: good steps after which the loss scale doubles (CARAML's "
               "GradScaler growth_interval)",
               "an integer >= 1", at_least_1));
  add(bind_key("channels_last", &IC::channels_last,
               "1 keeps images and activations in NHWC (channels-last) memory format", kBoolAllowed,
               bool_any));
  add(bind_key("zero_init_residual", &IC::zero_init_residual,
               "1 zero-initialises the last BatchNorm of each residual block", kBoolAllowed,
               bool_any));
  {
    const auto i = add(
        bind_key("conv_kernel", &IC::conv_kernel,
                 "the 3x3 stride-1 convolutions' kernel: winograd: oneDNN's Winograd F(4x4, 3x3) "
                 "(float32 CPU with AVX-512); native_winograd: our F(4x4, 3x3) (float32 CPU, "
                 "channels-last); probe: on each layer the fastest of those and LibTorch's, "
                 "measured on the first step; libtorch: LibTorch's (the reference); auto: probe "
                 "on a CPU in fp32, libtorch otherwise",
                 "one of auto, probe, winograd, native_winograd, libtorch"));
    t[i].choices = {"auto", "probe", "winograd", "native_winograd", "libtorch"};
    t[i].depends_on = {"precision"};
    t[i].cross_check = [](const IC& c) {
      return c.precision == "fp32" || c.conv_kernel == "auto" || c.conv_kernel == "libtorch"
                 ? std::string()
                 : std::string(
                       "auto or libtorch when precision is not fp32 (the Winograd kernels "
                       "run float32 only)");
    };
  }

  {
    const auto i = add(bind_key(
        "norm_kernel", &IC::norm_kernel,
        "each BatchNorm + ReLU pair (with the residual add between them in a block's last one): "
        "fused: one pass for the statistics and one for the output, two for the backward "
        "(float32 channels-last CPU tensors); libtorch: LibTorch's batch_norm, add and relu (the "
        "reference); auto: fused on a CPU in fp32 with channels_last, libtorch otherwise",
        "one of auto, fused, libtorch"));
    t[i].choices = {"auto", "fused", "libtorch"};
    t[i].depends_on = {"precision", "channels_last"};
    t[i].cross_check = [](const IC& c) {
      if (c.norm_kernel != "fused") return std::string();
      if (c.precision != "fp32")
        return std::string(
            "auto or libtorch when precision is not fp32 (the fused kernel runs "
            "float32 only)");
      return c.channels_last ? std::string()
                             : std::string(
                                   "auto or libtorch when channels_last is 0 (the fused "
                                   "kernel runs channels-last tensors only)");
    };
  }

  add_choice(bind_key("optimizer_kernel", &IC::optimizer_kernel,
                      "fused: SGD's update (weight decay, momentum, step) in one pass over each "
                      "parameter (CPU only); libtorch: LibTorch's SGD operations (the reference); "
                      "auto: fused on a CPU, libtorch elsewhere; the same update either way",
                      "one of auto, fused, libtorch"),
             {"auto", "fused", "libtorch"});

  // Run.
  add(rules::dataloader_workers_key<IC>());
  add(rules::device_key<IC>(/*extension=*/false));
  add(rules::device_sharing_key<IC>(/*extension=*/false));
  add(rules::checkpoint_interval_key<IC>());
  add(rules::progress_timeout_key<IC>(/*extension=*/false));
  return t;
}

}  // namespace

SchemaT<ImageClassificationConfig> build_schema(SchemaFor<ImageClassificationConfig>) {
  SchemaT<ImageClassificationConfig> s;
  s.command = "image_classification";
  s.keys = image_classification_keys();
  return s;
}

SCAFFOLD_CONFIG_STRUCT(ImageClassificationConfig);

}  // namespace scaffold::config
