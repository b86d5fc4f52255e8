// The 3-D U-Net of docs/benchmark.md, 'Model' (milesial Pytorch-UNet style, as ScaFFold builds
// it): DoubleConv, Down, Up, OutConv and UNet3d, with optional per-block activation checkpointing
// and an option to keep max-pool and transposed conv in float32 under autocast. It runs in either
// memory format, contiguous or channels-last 3-D (the memory_format key; the trainer converts the
// model and its inputs with model/memory_format.hpp). Not here: the trilinear variant (unused by
// ScaFFold). Spatial parallelism: model/spatial.hpp.
// Legend: N batch, C channels, D/H/W spatial sizes; shapes are NCDHW in either memory format.
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/fused_norm.hpp"
#include "nn/parameters.hpp"
#include "workloads/scaffold/model/kernel_choice.hpp"
#include "workloads/scaffold/model/spatial.hpp"

namespace scaffold::model {

struct UNetOptions {
  int in_channels = 3;
  int n_classes = 6;          // n_categories + 1 (background)
  int layers = 4;             // Down/Up pairs: problem_scale - unet_bottleneck_dim
  int base_channels = 64;     // channels of the first level (config key unet_base_channels)
  int group_norm_groups = 8;  // must divide every channel count
  bool activation_checkpointing = false;  // recompute every block in backward
  // Run MaxPool3d and ConvTranspose3d in float32 with autocast off, for LibTorch builds whose bf16
  // kernels for them are missing or broken (bf16_pool_and_upsample_work). Under autocast their
  // outputs stay float32 (the next conv casts again); without autocast they are cast back to the
  // input's dtype, so a model converted to bf16 as a whole works too. The GEMM upsampling
  // (kernels.upconv Gemm) is exempt: a bf16 matrix product is sound, so it runs in bf16; so is the
  // native max pool (kernels.pool Native), which pools bf16 exactly.
  bool fp32_pool_and_upsample = false;
  // Spatial parallelism: set when each sample is split across ranks (docs/distributed.md). The 3^3
  // convolutions then pad from their neighbours, and GroupNorm follows spatial->group_norm.
  // Null: the whole sample is here.
  std::shared_ptr<const SpatialContext> spatial;
  KernelChoice kernels;  // resolve_kernel_choice; a default one runs LibTorch's kernels
};

// Throws core::Error naming the first invalid option, its value and what is allowed.
void validate(const UNetOptions& options);

// Conv3d 3^3 (pad 1, no bias) -> GroupNorm -> ReLU, twice. GroupNorm runs in its parameters'
// dtype: under autocast that is float32, as CUDA autocast does (LibTorch 1.13's CPU autocast
// would pass it a bf16 input with float32 parameters, which its kernel rejects).
class DoubleConvImpl : public torch::nn::Module {
 public:
  DoubleConvImpl(int64_t in_channels, int64_t out_channels, int64_t groups,
                 std::shared_ptr<const SpatialContext> spatial = nullptr,
                 KernelChoice kernels = {});
  // (N, Cin, D, H, W) -> (N, Cout, D, H, W)
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv3d conv1_{nullptr};     // weight (Cout, Cin, 3, 3, 3)
  torch::nn::GroupNorm norm1_{nullptr};  // weight, bias (Cout)
  torch::nn::Conv3d conv2_{nullptr};     // weight (Cout, Cout, 3, 3, 3)
  torch::nn::GroupNorm norm2_{nullptr};  // weight, bias (Cout)
  std::shared_ptr<const SpatialContext> spatial_;
  KernelChoice kernels_;
  at::Tensor conv(torch::nn::Conv3d& conv, const at::Tensor& x);
  at::Tensor norm(torch::nn::GroupNorm& norm, const at::Tensor& x);
  at::Tensor norm_relu(torch::nn::GroupNorm& norm,
                       const at::Tensor& x);  // relu(norm(x)), fused or not
};
TORCH_MODULE(DoubleConv);

// MaxPool3d(2) -> DoubleConv(Cin, Cout).
class DownImpl : public torch::nn::Module {
 public:
  DownImpl(int64_t in_channels, int64_t out_channels, int64_t groups, bool fp32_pool,
           std::shared_ptr<const SpatialContext> spatial = nullptr, KernelChoice kernels = {});
  // (N, Cin, D, H, W) -> (N, Cout, D/2, H/2, W/2)
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::MaxPool3d pool_{nullptr};
  DoubleConv conv_{nullptr};
  bool fp32_pool_;
  KernelChoice kernels_;
};
TORCH_MODULE(Down);

// ConvTranspose3d(Cin -> Cin/2, k 2, s 2) -> pad to the skip -> cat([skip, up]) -> DoubleConv.
class UpImpl : public torch::nn::Module {
 public:
  UpImpl(int64_t in_channels, int64_t out_channels, int64_t groups, bool fp32_upsample,
         std::shared_ptr<const SpatialContext> spatial = nullptr, KernelChoice kernels = {});
  // x (N, Cin, D, H, W), skip (N, Cin/2, ~2D, ~2H, ~2W) -> (N, Cout, skip's D, H, W)
  at::Tensor forward(const at::Tensor& x, const at::Tensor& skip);

 private:
  torch::nn::ConvTranspose3d up_{nullptr};  // weight (Cin, Cin/2, 2, 2, 2), bias (Cin/2)
  DoubleConv conv_{nullptr};
  bool fp32_upsample_;
  KernelChoice kernels_;
  at::Tensor upsample(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const;
};
TORCH_MODULE(Up);

// Conv3d 1^3 with bias: the per-voxel classifier. No softmax.
class OutConvImpl : public torch::nn::Module {
 public:
  // kernels.head Gemm: on the CPU, the 1x1x1 convolution as a matrix product per sample
  // (LibTorch 1.13 sends it to slow_conv3d at batch 1).
  OutConvImpl(int64_t in_channels, int64_t n_classes, KernelChoice kernels = {});
  // (N, Cin, D, H, W) -> (N, n_classes, D, H, W)
  at::Tensor forward(const at::Tensor& x);

 private:
  at::Tensor product(const at::Tensor& x) const;

  torch::nn::Conv3d conv_{nullptr};  // weight (K, Cin, 1, 1, 1), bias (K)
  KernelChoice kernels_;
};
TORCH_MODULE(OutConv);

// Submodules: inc, down1..downL, up1..upL (up1 is the first decoder block, at the bottleneck),
// outc. Channels of level l are base_channels * 2^l.
class UNet3dImpl : public torch::nn::Module {
 public:
  explicit UNet3dImpl(const UNetOptions& options);
  // (N, in_channels, D, H, W) -> logits (N, n_classes, D, H, W). D, H and W must be divisible by
  // 2^layers (core::Error naming the shape otherwise).
  at::Tensor forward(const at::Tensor& x);
  const UNetOptions& options() const { return options_; }

 private:
  UNetOptions options_;
  DoubleConv inc_{nullptr};
  std::vector<Down> downs_;  // downs_[l] maps level l to level l+1
  std::vector<Up> ups_;      // ups_[k] maps level L-k to level L-k-1
  OutConv outc_{nullptr};
};
TORCH_MODULE(UNet3d);

// Model FLOPs of one forward pass of one sample of side^3 voxels: 2 FLOPs per multiply-add of every
// Conv3d, ConvTranspose3d and the 1^3 head; GroupNorm, ReLU, pooling, cat and biases not counted.
// With c_l = base * 2^l, v_l = (side / 2^l)^3, C_in = in_channels, K = n_classes:
//   inc        27 * (C_in*c_0 + c_0^2) * v_0
//   down l     27 * (c_{l-1}*c_l + c_l^2) * v_l                                  l = 1..L
//   up at l    8 * c_l * c_{l-1} * v_l  +  27 * (c_l*c_{l-1} + c_{l-1}^2) * v_{l-1}   l = L..1
//   outc       c_0 * K * v_0
// FLOPs = 2 * the sum. Throws core::Error for invalid options or a side not divisible by 2^L.
double unet_forward_flops(const UNetOptions& options, int64_t side);

// Whether bf16 max_pool3d and conv_transpose3d run and agree with float32 on `device` (a tiny
// probe; false if either throws). False on LibTorch 1.13 CPU (docs/performance.md).
bool bf16_pool_and_upsample_work(const c10::Device& device);

}  // namespace scaffold::model
