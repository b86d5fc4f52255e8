// ResNet-18/34/50/101/152 as torchvision 0.14 builds them (v1.5: a bottleneck strides on its 3x3
// conv), for CARAML's image-classification workload. Submodule names equal torchvision's
// state_dict keys (conv1, bn1, layer1.0.downsample.0.weight, fc.bias, ...). Not here: ResNeXt /
// wide variants (groups, width_per_group), dilation, a configurable stem or input channel count.
// Legend: N batch, C channels, H/W spatial sizes; tensors are NCHW (contiguous or channels-last).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/MemoryFormat.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_use.hpp"
#include "nn/memory_format.hpp"

namespace scaffold::imgcls {

// How the 3x3 stride-1 convolutions run (the key conv_kernel, docs/image_classification.md, "The
// 3x3 convolutions' kernel"); every other convolution runs LibTorch's.
// LibTorch: at::conv2d (oneDNN's direct kernel on a CPU), the reference.
// Winograd: oneDNN's Winograd F(4x4, 3x3) on every such layer oneDNN has one for (float32 CPU
// tensors outside autocast, AVX-512); LibTorch's elsewhere, counted as a fallback.
// NativeWinograd: our F(4x4, 3x3) (kernels/winograd_conv2d.hpp: float32 CPU tensors outside
// autocast, channels-last, channel counts multiples of 16, any x86 CPU); LibTorch's elsewhere,
// counted as a fallback.
// Probe: on each layer the fastest of those that take it, measured on the first call of each
// shape (kernels::choose_conv3x3); a Winograd only where it beats LibTorch's by the margin.
enum class ConvKernel { LibTorch, Winograd, NativeWinograd, Probe };

// "libtorch", "winograd", "native_winograd", "probe".
const char* to_string(ConvKernel k);

// conv_kernel resolved for the run's device and precision: auto is Probe on a CPU in fp32,
// LibTorch otherwise; probe, winograd and native_winograd need a CPU and fp32, winograd a build
// with oneDNN too, and are a core::Error naming the key, the value and what stands in the way
// otherwise (the schema has already refused them with another precision).
ConvKernel resolve_conv_kernel(const std::string& conv_kernel, const std::string& precision,
                               c10::Device device);

// The 3x3 stride-1 convolutions' kernel, shared by every block of a model.
struct ConvChoice {
  ConvKernel kernel = ConvKernel::LibTorch;
  // Counts each call as op "conv3x3" with the kernel that ran it (system.json's kernels_run), if
  // set; the caller registers the chosen kernels (register_choices).
  std::shared_ptr<kernels::KernelUse> use;

  // use->chose("conv3x3", ...) for `kernel`, when `use` is set.
  void register_choices() const;
  // c(x) for a 3x3 convolution `c` with stride 1 and padding 1, on the chosen kernel.
  at::Tensor run(torch::nn::Conv2d& c, const at::Tensor& x) const;
  // c(x) for any of the model's convolutions (padding (kernel - 1) / 2, no bias), LibTorch's; under
  // bf16 autocast on a CPU without bf16 products (kernels::bf16_products_emulated), bf16_conv()
  // instead, as run() does too. With the probe, a 1x1 stride-1 one runs as a matrix product where
  // kernels::choose_conv1x1 measures that faster (counted as op "conv1x1": gemm or libtorch).
  at::Tensor any(torch::nn::Conv2dImpl& c, const at::Tensor& x) const;
  // A downsample (the Sequential of a 1x1 convolution and a BatchNorm) on x, its convolution by
  // any().
  at::Tensor downsample(torch::nn::Sequential& d, const at::Tensor& x) const;
};

// c(x) as CPU autocast to bf16 computes it, with float32 products: x and c's weight rounded to
// bf16, LibTorch's float32 convolution of those values (exact products, float32 sums, as oneDNN's
// bf16 convolution sums), the output rounded to bf16; autograd through the casts rounds the
// gradients of x and the weight to bf16 as autocast's do. LibTorch 1.13's own bf16 convolution on
// such a CPU is a reference loop, ~35x slower than float32 (docs/image_classification.md, "bf16
// on a CPU without bf16 products"). Saves the float32 copy of x (an fp32 run's memory, twice a
// bf16 run's). For the model's convolutions: padding (kernel - 1) / 2, no bias.
at::Tensor bf16_conv(torch::nn::Conv2dImpl& c, const at::Tensor& x);

// How each BatchNorm that a ReLU follows runs, with the residual add between them in a block's
// last one (the key norm_kernel, docs/image_classification.md, "BatchNorm + ReLU").
// LibTorch: at::batch_norm, the add, relu_ (the reference).
// Fused: kernels::batch_norm_relu (one autograd node) in training mode on float32 channels-last
// CPU tensors; LibTorch's for any other input, counted as a fallback with its reason. Evaluation
// mode (running statistics, no backward) runs LibTorch's and is not counted.
enum class NormKernel { LibTorch, Fused };

// "libtorch", "fused".
const char* to_string(NormKernel k);

// norm_kernel resolved for the run: auto is Fused on a CPU in fp32 with channels-last tensors,
// LibTorch otherwise; fused anywhere else is a core::Error naming the key, the value and what
// stands in the way.
NormKernel resolve_norm_kernel(const std::string& norm_kernel, const std::string& precision,
                               c10::Device device, bool channels_last);

// The BatchNorm + ReLU kernel, shared by every block of a model.
struct NormChoice {
  NormKernel kernel = NormKernel::LibTorch;
  // Counts each training-mode call as op "bn_relu" with the kernel that ran it, if set.
  std::shared_ptr<kernels::KernelUse> use;

  // use->chose("bn_relu", ...) for `kernel`, when `use` is set.
  void register_choices() const;
  // relu(bn(x) + residual) (residual undefined: relu(bn(x))) on the chosen kernel; in training
  // mode the running statistics and num_batches_tracked advance as BatchNorm2d's forward does.
  at::Tensor bn_relu(torch::nn::BatchNorm2d& bn, const at::Tensor& x,
                     const at::Tensor& residual = {}) const;
};

// The input always has 3 channels (RGB), as torchvision's ResNet.
struct ResNetOptions {
  int depth = 50;                   // 18, 34 (basic blocks) or 50, 101, 152 (bottlenecks)
  int64_t num_classes = 1000;       // width of fc
  bool zero_init_residual = false;  // zero the last BN weight of every residual branch
  ConvChoice conv;                  // the 3x3 stride-1 convolutions' kernel
  NormChoice norm;                  // the BatchNorm + ReLU pairs' kernel
};

// Throws core::Error naming the first invalid option, its value and what is allowed.
void validate(const ResNetOptions& options);

// Two 3x3 convs: conv1 (stride) -> bn1 -> relu -> conv2 -> bn2, plus the shortcut, then relu.
// The shortcut is `downsample` (0: conv1x1 with the stride, 1: BatchNorm2d) when the stride is not
// 1 or the channel count changes, the identity otherwise.
class BasicBlockImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;  // out channels = planes * kExpansion
  BasicBlockImpl(int64_t in_channels, int64_t planes, int64_t stride, ConvChoice conv = {},
                 NormChoice norm = {});
  // (N, Cin, H, W) -> (N, planes, ceil(H / stride), ceil(W / stride))
  at::Tensor forward(const at::Tensor& x);
  // Zeroes bn2's weight, so the residual branch starts as zero (zero_init_residual).
  void zero_init_last_bn();

 private:
  torch::nn::Conv2d conv1_{nullptr};           // weight (planes, Cin, 3, 3)
  torch::nn::BatchNorm2d bn1_{nullptr};        // weight, bias, running_mean, running_var (planes)
  torch::nn::Conv2d conv2_{nullptr};           // weight (planes, planes, 3, 3)
  torch::nn::BatchNorm2d bn2_{nullptr};        // (planes)
  torch::nn::Sequential downsample_{nullptr};  // 0: weight (planes, Cin, 1, 1); 1: BN (planes)
  int64_t stride_ = 1;
  ConvChoice conv_;
  NormChoice norm_;
};
TORCH_MODULE(BasicBlock);

// conv1 1x1 -> bn1 -> relu -> conv2 3x3 (stride) -> bn2 -> relu -> conv3 1x1 -> bn3, plus the
// shortcut (as BasicBlock's, to planes * 4 channels), then relu. The stride sits on the 3x3 conv
// (torchvision's "v1.5"; the original paper's v1 strides the first 1x1).
class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;  // out channels = planes * kExpansion
  BottleneckImpl(int64_t in_channels, int64_t planes, int64_t stride, ConvChoice conv = {},
                 NormChoice norm = {});
  // (N, Cin, H, W) -> (N, 4 * planes, ceil(H / stride), ceil(W / stride))
  at::Tensor forward(const at::Tensor& x);
  // Zeroes bn3's weight, so the residual branch starts as zero (zero_init_residual).
  void zero_init_last_bn();

 private:
  torch::nn::Conv2d conv1_{nullptr};           // weight (planes, Cin, 1, 1)
  torch::nn::BatchNorm2d bn1_{nullptr};        // (planes)
  torch::nn::Conv2d conv2_{nullptr};           // weight (planes, planes, 3, 3)
  torch::nn::BatchNorm2d bn2_{nullptr};        // (planes)
  torch::nn::Conv2d conv3_{nullptr};           // weight (4 * planes, planes, 1, 1)
  torch::nn::BatchNorm2d bn3_{nullptr};        // (4 * planes)
  torch::nn::Sequential downsample_{nullptr};  // 0: weight (4 * planes, Cin, 1, 1); 1: BN
  int64_t stride_ = 1;
  ConvChoice conv_;
  NormChoice norm_;
};
TORCH_MODULE(Bottleneck);

// Submodules: conv1, bn1, maxpool, layer1..layer4 (Sequentials of blocks "0", "1", ...), avgpool,
// fc. Stage s has planes 64 * 2^s and strides 2 in its first block except in layer1.
// Initialisation as torchvision: convs kaiming_normal_(fan_out, relu), BN weight 1 and bias 0
// (eps 1e-5, momentum 0.1), fc LibTorch's Linear default (= PyTorch's), then zero_init_residual.
class ResNetImpl : public torch::nn::Module {
 public:
  explicit ResNetImpl(const ResNetOptions& options);
  // (N, 3, H, W) -> logits (N, num_classes). Any H, W >= 1 (every stage needs >= 1 pixel);
  // core::Error for another rank or channel count.
  at::Tensor forward(const at::Tensor& x);
  const ResNetOptions& options() const { return options_; }

 private:
  ResNetOptions options_;
  torch::nn::Conv2d conv1_{nullptr};       // weight (64, 3, 7, 7), stride 2, pad 3
  torch::nn::BatchNorm2d bn1_{nullptr};    // (64)
  torch::nn::MaxPool2d maxpool_{nullptr};  // 3x3, stride 2, pad 1
  std::array<torch::nn::Sequential, 4> layers_{nullptr, nullptr, nullptr, nullptr};  // layer1..4
  torch::nn::AdaptiveAvgPool2d avgpool_{nullptr};                                    // to 1x1
  torch::nn::Linear fc_{nullptr};  // weight (num_classes, 512 * expansion), bias (num_classes)
};
TORCH_MODULE(ResNet);

// Model FLOPs of one forward pass of one (3, height, width) image: 2 FLOPs per multiply-add of
// every Conv2d (stem, blocks, downsample shortcuts) and of fc. Not counted, as is usual: BatchNorm,
// ReLU, max and average pooling, the residual adds and fc's bias. A conv's multiply-adds are
// Cout * Cin * kh * kw * Hout * Wout, with Hout = floor((H + 2 pad - k) / stride) + 1.
// torchvision documents 1.81 (18), 3.66 (34), 4.09 (50), 7.80 (101), 11.51 (152) GMACs at 224x224,
// i.e. twice that in GFLOP. A training step is counted elsewhere as 3 forward passes.
// Throws core::Error for invalid options or a height or width below 1.
int64_t resnet_forward_flops(const ResNetOptions& options, int64_t height, int64_t width);

// Converts every 4-D parameter and buffer of `module` to `format` in place (LibTorch 1.13's
// Module::to has no memory-format overload): the shared helper of nn/memory_format.hpp. With
// ChannelsLast, feed channels-last inputs too.
using nn::set_memory_format;

}  // namespace scaffold::imgcls
