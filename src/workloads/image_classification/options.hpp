// The image-classification configuration: CARAML's PyTorch ResNet benchmark with its defaults
// (image_classification_torch.py; each value and its source line: docs/image_classification.md):
// plain SGD lr 0.01 (momentum 0, weight decay 0) with StepLR(10, 0.1), GradScaler(init_scale 1,
// growth_interval 100) for fp16 and bf16, PyTorch's TF32 defaults, 5 warm-up and 100 timed epochs
// over 9 000 + 1 000 synthetic 224x224 images. Built only by config/load (YAML + flags -> validated
// struct); immutable afterwards. Checks that need the rank count or the device (the global batch
// dividing over the ranks, tf32/fp16 needing CUDA) are the driver's.
#pragma once

#include <cstdint>
#include <string>

namespace scaffold::config {

struct ImageClassificationConfig {
  // Paths. base_run_dir and data_dir are resolved against the working directory at load time.
  std::string base_run_dir = "image_classification_runs";  // parent of the run directories
  std::string job_name = "image_classification";           // run directory prefix
  std::string checkpoint_dir = "checkpoints";              // subdirectory of the run directory
  std::string data_dir;  // dataset: folder: root holding train/ and val/ (one folder per class)

  int64_t seed = 42;  // the single seed for everything

  // Model and data.
  std::string model = "resnet50";  // resnet18 | resnet34 | resnet50 | resnet101 | resnet152
  int num_classes = 1000;          // classifier outputs
  int image_size = 224;            // square input side, pixels
  // synthetic (made on the host, CARAML's FakeData) | synthetic_device | folder (data_dir)
  std::string dataset = "synthetic";
  int synthetic_train_images = 9000;  // CARAML: 10 000 FakeData images split 9 000 / 1 000
  int synthetic_val_images = 1000;
  bool synthetic_separable = false;  // add a class-dependent signal (FakeData has none)
  bool skip_bad_images = false;      // folder: skip unreadable images instead of failing

  // Training.
  int global_batch_size = 64;  // over all data-parallel ranks (the driver checks it divides)
  int epochs = 100;            // timed epochs
  int warmup_epochs = 5;       // trained (train + val) before the timed epochs, in no figure
  double time_budget_s = 0.0;  // 0: none; else stop after the epoch in which it is passed
  std::string optimizer = "SGD";
  double learning_rate = 0.01;
  double momentum = 0.0;           // CARAML: torch.optim.SGD(params, lr=args.lr), momentum 0
  double weight_decay = 0.0;       // CARAML: SGD's default 0
  int lr_step_size = 10;           // StepLR: epochs between decays
  double lr_gamma = 0.1;           // StepLR: decay factor
  std::string precision = "fp32";  // fp32 | bf16 | tf32 | fp16 (tf32 and fp16 need CUDA)
  // CUDA: 1 keeps PyTorch's TF32 defaults as CARAML does (cuDNN convolutions may use TF32; cuBLAS
  // matmuls only with precision tf32); 0 turns TF32 off in both. No effect on a CPU.
  bool tf32 = true;
  // Dynamic loss scaling for fp16 and bf16 (CARAML's GradScaler(init_scale=1, growth_factor=2,
  // backoff_factor=0.5, growth_interval=100)).
  double loss_scale_init = 1.0;
  int loss_scale_growth_interval = 100;
  bool channels_last = true;        // NHWC memory format (CARAML: on)
  bool zero_init_residual = false;  // zero the last BatchNorm weight of each residual block
  // extension: the 3x3 stride-1 convolutions' kernel: auto | probe | winograd |
  // native_winograd | libtorch
  // (imgcls::ConvKernel; auto: probe on a CPU in fp32, libtorch otherwise)
  std::string conv_kernel = "auto";
  // extension: the BatchNorm + ReLU pairs' kernel: auto | fused | libtorch (imgcls::NormKernel;
  // auto: fused on a CPU in fp32 with channels_last, libtorch otherwise)
  std::string norm_kernel = "auto";
  // extension: SGD's update: auto | fused | libtorch (auto: fused on a CPU, libtorch elsewhere)
  std::string optimizer_kernel = "auto";

  // Run.
  int dataloader_num_workers = 2;  // data-loading workers per rank
  std::string device = "auto";     // auto | cpu | cuda
  bool device_sharing = false;     // 1 lets ranks of a node share a GPU
  int checkpoint_interval = -1;    // checkpoint every N epochs; <= 0 disables
  int progress_timeout_s = 1800;   // end the job after this long without a step; 0: never
};

}  // namespace scaffold::config
