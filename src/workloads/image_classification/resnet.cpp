// ResNet blocks and model (torchvision 0.14's resnet.py), option validation, the analytic FLOP
// count and the memory-format conversion. The FLOP count walks the same stage table as the model
// but never builds one, so it is cheap for any size. No pretrained weights, no ResNeXt widths.
#include "workloads/image_classification/resnet.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/init.h>

#include <array>
#include <string>

#include "core/error.hpp"
#include "kernels/batch_norm.hpp"
#include "kernels/conv1x1.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/winograd_conv2d.hpp"
#include "nn/autocast.hpp"

namespace scaffold::imgcls {
namespace {

namespace nn = torch::nn;

// torchvision's table: blocks per stage, and whether the blocks are bottlenecks.
struct StageLayout {
  std::array<int, 4> blocks;
  bool bottleneck;
};

// Only called after validate().
StageLayout stage_layout(int depth) {
  switch (depth) {
    case 18:
      return {{2, 2, 2, 2}, false};
    case 34:
      return {{3, 4, 6, 3}, false};
    case 50:
      return {{3, 4, 6, 3}, true};
    case 101:
      return {{3, 4, 23, 3}, true};
    default:
      return {{3, 8, 36, 3}, true};  // 152
  }
}

nn::Conv2d conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

nn::BatchNorm2d batch_norm(int64_t channels) {
  return nn::BatchNorm2d(nn::BatchNorm2dOptions(channels).eps(1e-5).momentum(0.1));
}

// torchvision's downsample: 1x1 conv with the block's stride, then BN. Null when the shortcut
// is the identity.
nn::Sequential make_downsample(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nn::Sequential(nullptr);
  return nn::Sequential(conv2d(in, out, 1, stride, 0), batch_norm(out));
}

int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

std::string shape_string(at::IntArrayRef sizes) {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

}  // namespace

void validate(const ResNetOptions& o) {
  auto fail = [](const std::string& what) { throw core::Error("ResNetOptions." + what); };
  if (o.depth != 18 && o.depth != 34 && o.depth != 50 && o.depth != 101 && o.depth != 152) {
    fail(fmt::format("depth must be one of 18, 34, 50, 101, 152, got {}", o.depth));
  }
  if (o.num_classes < 1) fail(fmt::format("num_classes must be >= 1, got {}", o.num_classes));
}

// --- The 3x3 convolutions' kernel ---------------------------------------------------------------

const char* to_string(ConvKernel k) {
  switch (k) {
    case ConvKernel::Winograd:
      return "winograd";
    case ConvKernel::NativeWinograd:
      return "native_winograd";
    case ConvKernel::Probe:
      return "probe";
    case ConvKernel::LibTorch:
      break;
  }
  return "libtorch";
}

void ConvChoice::register_choices() const {
  if (!use) return;
  using kernels::Conv3x3Kernel;
  switch (kernel) {
    case ConvKernel::Probe:
      use->chose("conv3x3",
                 {to_string(Conv3x3Kernel::DnnlWinograd), to_string(Conv3x3Kernel::NativeWinograd),
                  to_string(Conv3x3Kernel::LibTorch)});
      use->chose("conv1x1", {"gemm", "libtorch"});
      return;
    case ConvKernel::Winograd:
      use->chose("conv3x3", {to_string(Conv3x3Kernel::DnnlWinograd)});
      return;
    case ConvKernel::NativeWinograd:
      use->chose("conv3x3", {to_string(Conv3x3Kernel::NativeWinograd)});
      return;
    case ConvKernel::LibTorch:
      use->chose("conv3x3", {to_string(Conv3x3Kernel::LibTorch)});
      return;
  }
}

at::Tensor bf16_conv(nn::Conv2dImpl& c, const at::Tensor& x) {
  const scaffold::nn::AutocastGuard float32(scaffold::nn::AutocastState::current().disabled());
  const at::Tensor& w = c.weight;
  const std::array<int64_t, 2> padding{(w.size(2) - 1) / 2, (w.size(3) - 1) / 2};
  return at::conv2d(kernels::bf16_rounded(x), kernels::bf16_rounded(w), {}, c.options.stride(),
                    padding, c.options.dilation(), c.options.groups())
      .to(at::kBFloat16);
}

at::Tensor ConvChoice::any(nn::Conv2dImpl& c, const at::Tensor& x) const {
  if (x.device().is_cpu() && kernels::bf16_products_emulated()) return bf16_conv(c, x);
  const auto& stride = *c.options.stride();
  const auto& size = *c.options.kernel_size();
  if (kernel == ConvKernel::Probe && size[0] == 1 && size[1] == 1 && stride[0] == 1 &&
      stride[1] == 1 && !c.options.bias()) {
    const std::string k = kernels::choose_conv1x1(x, c.weight);
    if (use) use->ran("conv1x1", k);
    if (k == "gemm") return kernels::conv1x1_as_gemm(x, c.weight);
  }
  return c.forward(x);
}

at::Tensor ConvChoice::downsample(nn::Sequential& d, const at::Tensor& x) const {
  return d[1]->as<nn::BatchNorm2dImpl>()->forward(any(*d[0]->as<nn::Conv2dImpl>(), x));
}

namespace {

// The float32 3x3 convolution (stride 1, padding 1) of x by w on `choice`'s kernel, counted in its
// `use` as "<kernel><suffix>" with, where that kernel is not a chosen one, the reason (`fallback`
// where the choice itself gives none).
at::Tensor float32_conv3x3(const ConvChoice& choice, const at::Tensor& x, const at::Tensor& w,
                           const char* suffix, const char* fallback) {
  using kernels::Conv3x3Kernel;
  const ConvKernel kernel = choice.kernel;
  kernels::KernelUse* const use = choice.use.get();
  const auto ran = [&](Conv3x3Kernel k, const char* why) {
    if (use) use->ran("conv3x3", std::string(to_string(k)) + suffix, *why ? why : fallback);
  };
  const std::array<int64_t, 1> one{1};
  Conv3x3Kernel k = Conv3x3Kernel::LibTorch;
  if (kernel == ConvKernel::Probe)
    k = kernels::choose_conv3x3(x, w);
  else if (kernel == ConvKernel::Winograd &&
           kernels::dnnl_conv2d_supported(x, w, one, one, kernels::DnnlAlgorithm::Winograd))
    k = Conv3x3Kernel::DnnlWinograd;
  else if (kernel == ConvKernel::NativeWinograd && kernels::winograd_conv2d_supported(x, w))
    k = Conv3x3Kernel::NativeWinograd;
  switch (k) {
    case Conv3x3Kernel::DnnlWinograd:
      ran(k, "");
      return kernels::dnnl_conv2d(x, w, one, one, kernels::DnnlAlgorithm::Winograd);
    case Conv3x3Kernel::NativeWinograd:
      ran(k, "");
      return kernels::winograd_conv2d(x, w);
    case Conv3x3Kernel::LibTorch:
      break;
  }
  // Under Probe and LibTorch, LibTorch's is a chosen kernel (measured faster, or no Winograd).
  ran(Conv3x3Kernel::LibTorch,
      kernel == ConvKernel::Winograd ? "oneDNN has no Winograd for this layer on this CPU"
      : kernel == ConvKernel::NativeWinograd
          ? "the native Winograd takes channels-last inputs with channel counts that are "
            "multiples of 16"
          : "");
  return at::conv2d(x, w, {}, 1, 1);
}

}  // namespace

at::Tensor ConvChoice::run(nn::Conv2d& c, const at::Tensor& x) const {
  using kernels::Conv3x3Kernel;
  if (x.device().is_cpu() && kernels::bf16_products_emulated()) {
    // bf16_conv's detour on this choice's float32 kernels: autograd through the casts rounds
    // the gradients to bf16 as autocast's do.
    const scaffold::nn::AutocastGuard float32(scaffold::nn::AutocastState::current().disabled());
    return float32_conv3x3(*this, kernels::bf16_rounded(x), kernels::bf16_rounded(c->weight),
                           "_fp32",
                           "bf16 operands multiplied in float32: this CPU has no bf16 matrix "
                           "products")
        .to(at::kBFloat16);
  }
  if (kernel == ConvKernel::LibTorch) {
    if (use) use->ran("conv3x3", to_string(Conv3x3Kernel::LibTorch));
    return c(x);
  }
  // Only these reach a Winograd (float32); autocast would run the layer in bf16.
  const char* why = !x.device().is_cpu()                                 ? "not on the CPU"
                    : scaffold::nn::AutocastState::current().cpu_enabled ? "under autocast"
                    : x.scalar_type() != at::kFloat                      ? "not float32"
                                                                         : nullptr;
  if (!why) return float32_conv3x3(*this, x, c->weight, "", "");
  if (use) use->ran("conv3x3", to_string(Conv3x3Kernel::LibTorch), why);
  return c(x);
}

ConvKernel resolve_conv_kernel(const std::string& conv_kernel, const std::string& precision,
                               c10::Device device) {
  // auto: the probe where the 3x3 convolutions are float32 ones: an fp32 run on a CPU, and a bf16
  // one on a CPU without bf16 products (ConvChoice::run multiplies its bf16-rounded operands in
  // float32). The keys that name a Winograd stay fp32-only (the config's rule, whatever the CPU).
  if (conv_kernel == "auto")
    return device.is_cpu() && (precision == "fp32" ||
                               (precision == "bf16" && !kernels::cpu_has_bf16_products()))
               ? ConvKernel::Probe
               : ConvKernel::LibTorch;
  if (conv_kernel == "libtorch") return ConvKernel::LibTorch;
  if (conv_kernel != "probe" && conv_kernel != "winograd" && conv_kernel != "native_winograd")
    throw core::Error(fmt::format(
        "conv_kernel: {}: expected one of auto, probe, winograd, native_winograd, libtorch",
        conv_kernel));
  if (!device.is_cpu())
    throw core::Error(fmt::format(
        "conv_kernel: {} runs a Winograd convolution on the CPU, this run trains on {}; use auto "
        "or libtorch",
        conv_kernel, device.str()));
  if (precision != "fp32")
    throw core::Error(fmt::format(
        "conv_kernel: {} runs float32 only, this run's precision is {}; use auto or libtorch",
        conv_kernel, precision));
  if (conv_kernel == "native_winograd") return ConvKernel::NativeWinograd;
  if (conv_kernel == "probe") return ConvKernel::Probe;
  if (!kernels::dnnl_conv3d_built())
    throw core::Error(fmt::format(
        "conv_kernel: {}, but this build has no oneDNN (install libdnnl-dev and rebuild)",
        conv_kernel));
  return ConvKernel::Winograd;
}

// --- The BatchNorm + ReLU kernel -----------------------------------------------------------------

const char* to_string(NormKernel k) {
  return k == NormKernel::Fused ? "fused" : "libtorch";
}

NormKernel resolve_norm_kernel(const std::string& norm_kernel, const std::string& precision,
                               c10::Device device, bool channels_last) {
  const bool runs = device.is_cpu() && precision == "fp32" && channels_last;
  if (norm_kernel == "auto") return runs ? NormKernel::Fused : NormKernel::LibTorch;
  if (norm_kernel == "libtorch") return NormKernel::LibTorch;
  if (norm_kernel != "fused")
    throw core::Error(
        fmt::format("norm_kernel: {}: expected one of auto, fused, libtorch", norm_kernel));
  const std::string why = !device.is_cpu() ? "this run trains on " + device.str()
                          : precision != "fp32"
                              ? "this run's precision is " + precision + " (float32 only)"
                          : !channels_last ? "this run's tensors are NCHW (channels_last: 0)"
                                           : "";
  if (!why.empty())
    throw core::Error(fmt::format(
        "norm_kernel: fused runs float32 channels-last CPU tensors, {}; use auto or libtorch",
        why));
  return NormKernel::Fused;
}

void NormChoice::register_choices() const {
  if (use) use->chose("bn_relu", {to_string(kernel)});
}

at::Tensor NormChoice::bn_relu(nn::BatchNorm2d& bn, const at::Tensor& x,
                               const at::Tensor& residual) const {
  const auto reference = [&] {
    at::Tensor out = bn(x);
    if (residual.defined()) out += residual;
    return out.relu_();
  };
  if (!bn->is_training()) return reference();
  const char* chosen = to_string(kernel);
  std::string why;
  if (kernel == NormKernel::Fused) {
    why = scaffold::nn::AutocastState::current().cpu_enabled
              ? "under autocast"
              : kernels::batch_norm_relu_unsupported(x, bn->weight, bn->bias, bn->running_mean,
                                                     bn->running_var, residual);
    if (why.empty()) {
      if (use) use->ran("bn_relu", chosen);
      const auto& o = bn->options;
      double momentum = o.momentum().value_or(0.0);
      if (o.track_running_stats()) {  // as BatchNormImplBase::forward
        torch::NoGradGuard no_grad;
        bn->num_batches_tracked += 1;
        if (!o.momentum()) momentum = 1.0 / bn->num_batches_tracked.item<double>();
      }
      return kernels::batch_norm_relu(x, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                                      momentum, o.eps(), residual);
    }
  }
  if (use) use->ran("bn_relu", "libtorch", why);
  return reference();
}

// --- BasicBlock ----------------------------------------------------------------------------------

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t planes, int64_t stride, ConvChoice conv,
                               NormChoice norm)
    : stride_(stride), conv_(std::move(conv)), norm_(std::move(norm)) {
  conv1_ = register_module("conv1", conv2d(in_channels, planes, 3, stride, 1));
  bn1_ = register_module("bn1", batch_norm(planes));
  conv2_ = register_module("conv2", conv2d(planes, planes, 3, 1, 1));
  bn2_ = register_module("bn2", batch_norm(planes));
  downsample_ = make_downsample(in_channels, planes * kExpansion, stride);
  if (downsample_) register_module("downsample", downsample_);
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  // (LibTorch's path adds and applies ReLU in place: BatchNorm's backward needs its input and
  // statistics, not its output.)
  at::Tensor out = norm_.bn_relu(bn1_, stride_ == 1 ? conv_.run(conv1_, x) : conv_.any(*conv1_, x));
  return norm_.bn_relu(bn2_, conv_.run(conv2_, out),
                       downsample_ ? conv_.downsample(downsample_, x) : x);
}

void BasicBlockImpl::zero_init_last_bn() {
  torch::NoGradGuard no_grad;
  bn2_->weight.zero_();
}

// --- Bottleneck ----------------------------------------------------------------------------------

BottleneckImpl::BottleneckImpl(int64_t in_channels, int64_t planes, int64_t stride, ConvChoice conv,
                               NormChoice norm)
    : stride_(stride), conv_(std::move(conv)), norm_(std::move(norm)) {
  conv1_ = register_module("conv1", conv2d(in_channels, planes, 1, 1, 0));
  bn1_ = register_module("bn1", batch_norm(planes));
  conv2_ = register_module("conv2", conv2d(planes, planes, 3, stride, 1));
  bn2_ = register_module("bn2", batch_norm(planes));
  conv3_ = register_module("conv3", conv2d(planes, planes * kExpansion, 1, 1, 0));
  bn3_ = register_module("bn3", batch_norm(planes * kExpansion));
  downsample_ = make_downsample(in_channels, planes * kExpansion, stride);
  if (downsample_) register_module("downsample", downsample_);
}

at::Tensor BottleneckImpl::forward(const at::Tensor& x) {
  at::Tensor out = norm_.bn_relu(bn1_, conv_.any(*conv1_, x));
  out = norm_.bn_relu(bn2_, stride_ == 1 ? conv_.run(conv2_, out) : conv_.any(*conv2_, out));
  return norm_.bn_relu(bn3_, conv_.any(*conv3_, out),
                       downsample_ ? conv_.downsample(downsample_, x) : x);
}

void BottleneckImpl::zero_init_last_bn() {
  torch::NoGradGuard no_grad;
  bn3_->weight.zero_();
}

// --- ResNet --------------------------------------------------------------------------------------

ResNetImpl::ResNetImpl(const ResNetOptions& options) : options_(options) {
  validate(options_);
  const StageLayout layout = stage_layout(options_.depth);
  const int64_t expansion =
      layout.bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
  conv1_ = register_module("conv1", conv2d(3, 64, 7, 2, 3));
  bn1_ = register_module("bn1", batch_norm(64));
  maxpool_ =
      register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  int64_t in_channels = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = int64_t{64} << s;
    nn::Sequential layer;
    for (int b = 0; b < layout.blocks[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      if (layout.bottleneck) {
        layer->push_back(Bottleneck(in_channels, planes, stride, options_.conv, options_.norm));
      } else {
        layer->push_back(BasicBlock(in_channels, planes, stride, options_.conv, options_.norm));
      }
      in_channels = planes * expansion;
    }
    layers_[s] = register_module("layer" + std::to_string(s + 1), layer);
  }
  avgpool_ = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  fc_ = register_module("fc", nn::Linear(nn::LinearOptions(in_channels, options_.num_classes)));

  // torchvision's loop over self.modules(); Linear keeps its default initialisation.
  torch::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2dImpl>()) {
      nn::init::kaiming_normal_(conv->weight, /*a=*/0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = m->as<nn::BatchNorm2dImpl>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
  // Each residual branch then starts as zero, so every block starts as relu(shortcut)
  // (Goyal et al. 2017, "Accurate, Large Minibatch SGD").
  if (options_.zero_init_residual) {
    for (const auto& m : modules(/*include_self=*/false)) {
      if (auto* block = m->as<BottleneckImpl>()) block->zero_init_last_bn();
      if (auto* block = m->as<BasicBlockImpl>()) block->zero_init_last_bn();
    }
  }
}

at::Tensor ResNetImpl::forward(const at::Tensor& x) {
  if (x.dim() != 4 || x.size(1) != 3) {
    throw core::Error(
        fmt::format("ResNet input of shape {}: expected (N, 3, H, W)", shape_string(x.sizes())));
  }
  at::Tensor h = maxpool_(options_.norm.bn_relu(bn1_, options_.conv.any(*conv1_, x)));
  for (auto& layer : layers_) h = layer->forward(h);
  h = avgpool_(h).flatten(1);
  // The classifier as the convolutions: float32 products where bf16 ones would be reference loops.
  if (h.device().is_cpu() && kernels::bf16_products_emulated())
    return kernels::bf16_linear(h, fc_->weight, fc_->bias, kernels::GemmKernel::LibTorch);
  return fc_(h);
}

// --- FLOPs ---------------------------------------------------------------------------------------

int64_t resnet_forward_flops(const ResNetOptions& options, int64_t height, int64_t width) {
  validate(options);
  if (height < 1 || width < 1) {
    throw core::Error(
        fmt::format("ResNet FLOPs: image of {}x{} pixels: height and width must be "
                    ">= 1",
                    height, width));
  }
  const StageLayout layout = stage_layout(options.depth);
  int64_t h = conv_out(height, 7, 2, 3);
  int64_t w = conv_out(width, 7, 2, 3);
  int64_t macs = 64 * 3 * 7 * 7 * h * w;  // stem conv1
  h = conv_out(h, 3, 2, 1);               // maxpool
  w = conv_out(w, 3, 2, 1);
  int64_t in = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = int64_t{64} << s;
    for (int b = 0; b < layout.blocks[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      // The 3x3 (pad 1) and the 1x1 shortcut (pad 0) with this stride give the same size.
      const int64_t ho = conv_out(h, 3, stride, 1);
      const int64_t wo = conv_out(w, 3, stride, 1);
      int64_t out;
      if (layout.bottleneck) {
        out = planes * BottleneckImpl::kExpansion;
        macs += planes * in * h * w;            // conv1 1x1, stride 1
        macs += planes * planes * 9 * ho * wo;  // conv2 3x3, stride
        macs += out * planes * ho * wo;         // conv3 1x1
      } else {
        out = planes * BasicBlockImpl::kExpansion;
        macs += planes * in * 9 * ho * wo;      // conv1 3x3, stride
        macs += planes * planes * 9 * ho * wo;  // conv2 3x3
      }
      if (stride != 1 || in != out) macs += out * in * ho * wo;  // downsample 1x1
      in = out;
      h = ho;
      w = wo;
    }
  }
  macs += in * options.num_classes;  // fc; average pooling leaves `in` features
  return 2 * macs;
}

}  // namespace scaffold::imgcls
