// The kernels one ScaFFold run trains with: one enum per op with a choice (the 3^3 convolutions,
// the transposed convolutions, GroupNorm + ReLU, max pooling, the 1x1x1 head, the loss's voxel
// sums, the optimiser), resolved once from the *_kernel keys for the run's device, layout and
// precision. The same KernelChoice builds the model (UNetOptions::kernels), the task (loss,
// optimiser), system.json's `kernels` and summary.json's *_kernel parameters; its `use` tally
// counts what each op actually ran (system.json's `kernels_run`, docs/config.md, "Kernel keys").
// No tensor code here: the choice is names and enums.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_use.hpp"

namespace scaffold::model {

// conv_kernel. Probe: Winograd F(2,3) on the float32 layers where a measurement on this machine
// finds it faster (kernels::winograd_conv3d_pays), oneDNN (where built) for the others; Winograd:
// Winograd on every layer it takes (kernels/winograd_conv.hpp), oneDNN for the others; OneDnn:
// oneDNN at every batch size (kernels/dnnl_conv.hpp); LibTorch: at::conv3d.
enum class ConvKernel { LibTorch, OneDnn, Winograd, Probe };
// upconv_kernel. Gemm: the k2 s2 transposed convolution as one matrix product per sample
// (kernels/conv_transpose.hpp).
enum class UpconvKernel { LibTorch, Gemm };
// groupnorm_kernel. Fused: GroupNorm + ReLU in one CPU kernel (kernels/fused_norm.hpp) wherever it
// takes the input (contiguous CPU tensors); Unfused: LibTorch's group_norm, then relu.
enum class NormKernel { Unfused, Fused };
// pool_kernel. Native: the k2 s2 max pool of kernels/max_pool.hpp.
enum class PoolKernel { LibTorch, Native };
// head_kernel. Gemm: the 1x1x1 classifier as a matrix product per sample (conv3d_1x1x1).
enum class HeadKernel { LibTorch, Gemm };
// loss_kernel. Fused: the loss's voxel sums in one CPU pass (workloads/scaffold/fused_loss.hpp).
enum class LossKernel { LibTorch, Fused };
// optimizer_kernel. Fused: Adam in one pass per parameter (kernels/fused_adam.hpp); only Adam has
// one.
enum class OptimizerKernel { LibTorch, Fused };

const char* to_string(ConvKernel k);
const char* to_string(UpconvKernel k);
const char* to_string(NormKernel k);
const char* to_string(PoolKernel k);
const char* to_string(HeadKernel k);
const char* to_string(LossKernel k);
const char* to_string(OptimizerKernel k);

// The values each *_kernel key takes, auto first: the schema's allowed lists
// (workloads/scaffold/schema.cpp) and resolve_kernel_choice's checks are these lists.
namespace kernel_values {
inline const std::vector<std::string> kConv{"auto", "probe", "winograd", "onednn", "libtorch"};
inline const std::vector<std::string> kUpconv{"auto", "gemm", "libtorch"};
inline const std::vector<std::string> kGroupNorm{"auto", "fused", "unfused"};
inline const std::vector<std::string> kPool{"auto", "native", "libtorch"};
inline const std::vector<std::string> kHead{"auto", "gemm", "libtorch"};
inline const std::vector<std::string> kLoss{"auto", "fused", "libtorch"};
inline const std::vector<std::string> kOptimizer{"auto", "fused", "libtorch"};
}  // namespace kernel_values

// The keys as the configuration has them (each auto or a kernel's name).
struct KernelKeys {
  std::string conv = "auto";
  std::string upconv = "auto";
  std::string groupnorm = "auto";
  std::string pool = "auto";
  std::string head = "auto";
  std::string loss = "auto";
  std::string optimizer_kernel = "auto";
  std::string optimizer = "ADAM";  // the optimizer key: only ADAM has a fused kernel
};

// Where the run trains and how: what `auto` and the fallbacks depend on.
struct KernelTarget {
  bool cpu = true;
  std::string device = "cpu";  // for the messages
  bool channels_last = false;
  bool bf16_autocast = false;
  bool onednn_built = false;  // kernels::dnnl_conv3d_built() of this binary
  // Whether the CPU has bf16 products (core::cpu_has_bf16_products): where it has not, bf16
  // autocast runs float32 convolutions of bf16-rounded operands, on the float32 kernels.
  bool bf16_products = true;
};

struct KernelChoice {
  ConvKernel conv = ConvKernel::LibTorch;
  UpconvKernel upconv = UpconvKernel::LibTorch;
  NormKernel norm = NormKernel::Unfused;
  PoolKernel pool = PoolKernel::LibTorch;
  HeadKernel head = HeadKernel::LibTorch;
  LossKernel loss = LossKernel::LibTorch;
  OptimizerKernel optimizer = OptimizerKernel::LibTorch;
  // What resolving changed from the keys because it cannot run here, one line each (e.g. "conv:
  // onednn instead of probe (bf16 autocast: Winograd F(2,3) runs float32 only)"); logged once
  // by resolve_kernel_choice.
  std::vector<std::string> fallbacks;
  // The calls each op ran on each kernel (null: nothing counted, e.g. a model built in a test).
  std::shared_ptr<kernels::KernelUse> use;

  // "conv=probe", "upconv=gemm", "groupnorm=unfused", "pool=native", "head=gemm",
  // "loss=fused", "optimizer=fused": system.json's kernels.
  std::vector<std::string> names() const;
  // The kernels each op may run under this choice, registered in `use` (a Winograd or probe
  // choice runs oneDNN or LibTorch on the layers Winograd does not take or where it does not pay;
  // any other kernel is a fallback).
  void register_choices() const;
  // use->ran(op, kernel, why) when `use` is set.
  void ran(const char* op, const char* kernel, const char* why = "") const;
};

// Resolves every key once. auto picks what measured faster in whole steps (docs/performance.md):
// on the CPU the convolution probe (Winograd where it measures faster, oneDNN for the rest), the
// GEMM transposed convolution and head, the native
// max pool, the fused loss and Adam, LibTorch's GroupNorm; LibTorch's kernels elsewhere. A named
// kernel that cannot run here is a core::Error naming the key (gemm on CUDA, onednn without
// oneDNN, fused Adam for SGD, ...), except Winograd or the probe under bf16 autocast, which becomes
// oneDNN (or
// LibTorch) with a fallback line, since Winograd runs float32 only. Sets `use` to a new tally with
// the choices registered.
KernelChoice resolve_kernel_choice(const KernelKeys& keys, const KernelTarget& target);

}  // namespace scaffold::model
