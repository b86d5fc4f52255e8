// UNet3d and its blocks (docs/benchmark.md, 'Model'), option validation, the parameter and FLOP
// counts, and the bf16 probe. Initialisation is LibTorch's module default (as PyTorch's): nothing
// is re-initialised here. The fp32 path turns autocast off around pool/upsample only; the
// convolutions around them stay under whatever autocast the caller set. GroupNorm always runs in
// its parameters' dtype.
#include "workloads/scaffold/model/unet.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/conv_transpose.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/max_pool.hpp"
#include "kernels/winograd_conv.hpp"
#include "nn/autocast.hpp"
#include "nn/checkpoint.hpp"
#include "nn/memory_format.hpp"

namespace scaffold::model {
namespace {

constexpr int kMaxLayers = 24;  // keeps base * 2^layers far inside int64

std::string shape_string(at::IntArrayRef sizes) {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// Autocast hands GroupNorm a bf16/fp16 conv output with float32 affine parameters. CUDA autocast
// runs group_norm in float32; LibTorch 1.13's CPU autocast leaves it alone and its kernel rejects
// the mixed dtypes, so the input is cast to the parameters' dtype here, which is CUDA's behaviour.
at::Tensor group_norm(torch::nn::GroupNorm& norm, const at::Tensor& x) {
  const c10::ScalarType dtype = norm->weight.scalar_type();
  return norm(x.scalar_type() == dtype ? x : x.to(dtype));
}

// op(x as float32) with autocast off. Under autocast (for x's device) the float32 result is kept,
// the next conv casts it again; without autocast it goes back to x's dtype, so a model converted
// to bf16 as a whole works too.
template <typename Op>
at::Tensor in_fp32(const at::Tensor& x, Op&& op) {
  const nn::AutocastState state = nn::AutocastState::current();
  const bool autocast_on = x.is_cuda() ? state.cuda_enabled : state.cpu_enabled;
  at::Tensor y;
  {
    nn::AutocastGuard autocast_off(state.disabled());
    y = op(x.to(at::kFloat));
  }
  return autocast_on ? y : y.to(x.scalar_type());
}

}  // namespace

void validate(const UNetOptions& o) {
  auto fail = [](const std::string& what) { throw core::Error("UNetOptions." + what); };
  if (o.in_channels < 1) fail(fmt::format("in_channels must be >= 1, got {}", o.in_channels));
  if (o.n_classes < 2) {
    fail(fmt::format("n_classes must be >= 2 (background + at least one class), got {}",
                     o.n_classes));
  }
  if (o.layers < 1 || o.layers > kMaxLayers) {
    fail(fmt::format("layers must be in [1, {}], got {}", kMaxLayers, o.layers));
  }
  if (o.base_channels < 1) {
    fail(fmt::format("base_channels (unet_base_channels) must be >= 1, got {}", o.base_channels));
  }
  // Every channel count is base_channels * 2^l, so dividing the base is dividing them all.
  if (o.group_norm_groups < 1 || o.base_channels % o.group_norm_groups != 0) {
    fail(
        fmt::format("group_norm_groups must be >= 1 and divide every channel count "
                    "(base_channels = {} is the narrowest), got {}",
                    o.base_channels, o.group_norm_groups));
  }
}

// --- DoubleConv ----------------------------------------------------------------------------------

DoubleConvImpl::DoubleConvImpl(int64_t in_channels, int64_t out_channels, int64_t groups,
                               std::shared_ptr<const SpatialContext> spatial, KernelChoice kernels)
    : spatial_(std::move(spatial)), kernels_(std::move(kernels)) {
  namespace nn = torch::nn;
  conv1_ = register_module(
      "conv1", nn::Conv3d(nn::Conv3dOptions(in_channels, out_channels, 3).padding(1).bias(false)));
  norm1_ = register_module(
      "norm1", nn::GroupNorm(nn::GroupNormOptions(groups, out_channels).eps(1e-5).affine(true)));
  conv2_ = register_module(
      "conv2", nn::Conv3d(nn::Conv3dOptions(out_channels, out_channels, 3).padding(1).bias(false)));
  norm2_ = register_module(
      "norm2", nn::GroupNorm(nn::GroupNormOptions(groups, out_channels).eps(1e-5).affine(true)));
}

at::Tensor DoubleConvImpl::conv(torch::nn::Conv3d& c, const at::Tensor& x) {
  if (spatial_) {
    kernels_.ran("conv", "libtorch", "a sample split across ranks: the halo convolution");
    return conv3d_same(x, c->weight, c->bias, spatial_);
  }
  if (kernels_.conv != ConvKernel::LibTorch && x.device().is_cpu() &&
      kernels::bf16_products_emulated()) {
    // bf16 autocast on a CPU without bf16 products (docs/benchmark.md): the float32 kernels on the
    // bf16-rounded operands, the output rounded to bf16 (autograd through the casts rounds the
    // gradients as autocast's do).
    const nn::AutocastGuard float32(nn::AutocastState::current().disabled());
    const at::Tensor xf = kernels::bf16_rounded(x), wf = kernels::bf16_rounded(c->weight);
    const char* why = "bf16 operands multiplied in float32: this CPU has no bf16 matrix products";
    if ((kernels_.conv == ConvKernel::Winograd && kernels::winograd_conv3d_supported(xf, wf)) ||
        (kernels_.conv == ConvKernel::Probe && kernels::winograd_conv3d_pays(xf, wf))) {
      kernels_.ran("conv", "winograd_fp32", why);
      return kernels::winograd_conv3d(xf, wf).to(at::kBFloat16);
    }
    if (kernels::dnnl_conv3d_supported(xf, wf)) {
      kernels_.ran("conv", "onednn_fp32", why);
      return kernels::dnnl_conv3d(xf, wf, /*padding=*/1).to(at::kBFloat16);
    }
    kernels_.ran("conv", "libtorch_fp32", why);
    return at::conv3d(xf, wf, kernels::bf16_rounded(c->bias), 1, 1).to(at::kBFloat16);
  }
  if (kernels_.conv != ConvKernel::LibTorch && x.device().is_cpu()) {
    // CPU autocast would run the convolution in its lower dtype: the same casts, by hand (the
    // custom functions are not on autocast's list).
    const nn::AutocastState state = nn::AutocastState::current();
    const c10::ScalarType dtype = state.cpu_enabled ? state.cpu_dtype : x.scalar_type();
    const at::Tensor xc = x.to(dtype), wc = c->weight.to(dtype);
    if ((kernels_.conv == ConvKernel::Winograd && kernels::winograd_conv3d_supported(xc, wc)) ||
        (kernels_.conv == ConvKernel::Probe && kernels::winograd_conv3d_pays(xc, wc))) {
      kernels_.ran("conv", "winograd");
      return kernels::winograd_conv3d(xc, wc);
    }
    if (kernels::dnnl_conv3d_supported(xc, wc)) {
      kernels_.ran("conv", "onednn");
      return kernels::dnnl_conv3d(xc, wc, /*padding=*/1);
    }
    kernels_.ran("conv", "libtorch", "an input oneDNN does not take");
    return c(x);
  }
  kernels_.ran("conv", "libtorch", x.device().is_cpu() ? "" : "not on the CPU");
  return c(x);
}

at::Tensor DoubleConvImpl::norm(torch::nn::GroupNorm& n, const at::Tensor& x) {
  if (spatial_ && spatial_->group_norm == GroupNormMode::Global) {
    const auto& o = n->options;
    return group_norm_global(x, o.num_groups(), n->weight, n->bias, o.eps(), spatial_);
  }
  return group_norm(n, x);  // unsharded, or `local`: each shard's own statistics
}

at::Tensor DoubleConvImpl::norm_relu(torch::nn::GroupNorm& n, const at::Tensor& x) {
  if (kernels_.norm == NormKernel::Fused) {
    // The fused kernel reads a bf16 conv output as it is (what the cast below would feed torch's
    // GroupNorm); anything else goes to the parameters' dtype first, as group_norm() does.
    const c10::ScalarType dtype = n->weight.scalar_type();
    const at::Tensor xin =
        x.scalar_type() == dtype || x.scalar_type() == at::kBFloat16 ? x : x.to(dtype);
    const auto& o = n->options;
    const std::string unsupported =
        kernels::group_norm_relu_unsupported(xin, o.num_groups(), n->weight, n->bias);
    if (unsupported.empty()) {
      const bool global = spatial_ && spatial_->group_norm == GroupNormMode::Global;
      kernels_.ran("groupnorm", "fused");
      return group_norm_relu(
          xin, o.num_groups(), n->weight, n->bias, o.eps(),
          global ? group_norm_reduction(spatial_) : kernels::GroupNormReduction{});
    }
    kernels_.ran("groupnorm", "unfused", unsupported.c_str());
  } else {
    kernels_.ran("groupnorm", "unfused");
  }
  // In-place ReLU: GroupNorm's backward needs its input and statistics, not its output (the
  // global GroupNorm's addcmul saves its inputs, not its output, too).
  return norm(n, x).relu_();
}

at::Tensor DoubleConvImpl::forward(const at::Tensor& x) {
  at::Tensor h = norm_relu(norm1_, conv(conv1_, x));
  return norm_relu(norm2_, conv(conv2_, h));
}

// --- Down ----------------------------------------------------------------------------------------

DownImpl::DownImpl(int64_t in_channels, int64_t out_channels, int64_t groups, bool fp32_pool,
                   std::shared_ptr<const SpatialContext> spatial, KernelChoice kernels)
    : fp32_pool_(fp32_pool), kernels_(kernels) {
  pool_ = register_module("pool", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(2)));
  conv_ = register_module(
      "conv", DoubleConv(in_channels, out_channels, groups, std::move(spatial), kernels));
}

at::Tensor DownImpl::forward(const at::Tensor& x) {
  // The native kernel pools bf16 as it is (a maximum rounds nothing), so it takes no float32
  // detour.
  if (kernels_.pool == PoolKernel::Native) {
    if (kernels::max_pool3d_k2s2_supported(x)) {
      kernels_.ran("pool", "native");
      return conv_(kernels::max_pool3d_k2s2(x));
    }
    kernels_.ran("pool", "libtorch", "an input the native kernel does not take");
  } else {
    kernels_.ran("pool", "libtorch");
  }
  return conv_(fp32_pool_ ? in_fp32(x, [this](const at::Tensor& xf) { return pool_(xf); })
                          : pool_(x));
}

// --- Up ------------------------------------------------------------------------------------------

UpImpl::UpImpl(int64_t in_channels, int64_t out_channels, int64_t groups, bool fp32_upsample,
               std::shared_ptr<const SpatialContext> spatial, KernelChoice kernels)
    : fp32_upsample_(fp32_upsample), kernels_(kernels) {
  namespace nn = torch::nn;
  up_ = register_module(
      "up", nn::ConvTranspose3d(
                nn::ConvTranspose3dOptions(in_channels, in_channels / 2, 2).stride(2).bias(true)));
  conv_ = register_module(
      "conv", DoubleConv(in_channels, out_channels, groups, std::move(spatial), kernels));
}

at::Tensor UpImpl::upsample(const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) const {
  if (kernels_.upconv == UpconvKernel::Gemm) {
    kernels_.ran("upconv", "gemm");
    // Under CPU autocast, in its lower dtype (conv_transpose3d is on autocast's list); where
    // that is bf16 on a CPU without bf16 products, float32 products of the bf16-rounded operands.
    const nn::AutocastState state = nn::AutocastState::current();
    const bool cast = x.device().is_cpu() && state.cpu_enabled;
    if (cast && kernels::bf16_products_emulated()) {
      const nn::AutocastGuard float32(state.disabled());
      return kernels::conv_transpose3d_k2s2(kernels::bf16_rounded(x), kernels::bf16_rounded(weight),
                                            kernels::bf16_rounded(bias))
          .to(at::kBFloat16);
    }
    const c10::ScalarType dtype = cast ? state.cpu_dtype : x.scalar_type();
    return kernels::conv_transpose3d_k2s2(x.to(dtype), weight.to(dtype),
                                          bias.defined() ? bias.to(dtype) : bias);
  }
  kernels_.ran("upconv", "libtorch");
  return at::conv_transpose3d(x, weight, bias, /*stride=*/{2, 2, 2});
}

at::Tensor UpImpl::forward(const at::Tensor& x, const at::Tensor& skip) {
  at::Tensor up;
  // The GEMM upsampling runs in bf16 under autocast (a bf16 matrix product is sound on every CPU
  // LibTorch supports), so only LibTorch's own transposed convolution needs the float32 detour.
  if (fp32_upsample_ && kernels_.upconv != UpconvKernel::Gemm) {
    // The parameters are cast too (a no-op unless the model was converted as a whole).
    up = in_fp32(x, [this](const at::Tensor& xf) {
      return upsample(xf, up_->weight.to(at::kFloat), up_->bias.to(at::kFloat));
    });
  } else {
    up = upsample(x, up_->weight, up_->bias);
  }
  // Pad (or crop) symmetrically to the skip's D, H, W; never needed for power-of-two volumes.
  const int64_t dd = skip.size(2) - up.size(2);
  const int64_t dh = skip.size(3) - up.size(3);
  const int64_t dw = skip.size(4) - up.size(4);
  if (dd != 0 || dh != 0 || dw != 0) {
    up =
        at::constant_pad_nd(up, {dw / 2, dw - dw / 2, dh / 2, dh - dh / 2, dd / 2, dd - dd / 2}, 0);
  }
  return conv_(at::cat({skip, up}, /*dim=*/1));
}

// --- OutConv -------------------------------------------------------------------------------------

OutConvImpl::OutConvImpl(int64_t in_channels, int64_t n_classes, KernelChoice kernels)
    : kernels_(std::move(kernels)) {
  conv_ = register_module(
      "conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(in_channels, n_classes, 1).bias(true)));
}

at::Tensor OutConvImpl::forward(const at::Tensor& x) {
  if (kernels_.head == HeadKernel::Gemm) {
    if (x.device().is_cpu() && x.dim() == 5) {
      kernels_.ran("head", "gemm");
      return product(x);
    }
    kernels_.ran("head", "libtorch", "not a 5-d CPU input");
  } else {
    kernels_.ran("head", "libtorch");
  }
  return conv_(x);
}

// y = W x + b voxel by voxel as matrix products (conv_transpose.hpp). Under CPU autocast in its
// lower dtype, as conv3d would run (the custom function is not on autocast's list).
at::Tensor OutConvImpl::product(const at::Tensor& x) const {
  const nn::AutocastState state = nn::AutocastState::current();
  if (state.cpu_enabled && kernels::bf16_products_emulated()) {
    // bf16 on a CPU without bf16 products: float32 products of the bf16-rounded operands.
    const nn::AutocastGuard float32(state.disabled());
    return kernels::conv3d_1x1x1(kernels::bf16_rounded(x), kernels::bf16_rounded(conv_->weight),
                                 kernels::bf16_rounded(conv_->bias))
        .to(at::kBFloat16);
  }
  const c10::ScalarType dtype = state.cpu_enabled ? state.cpu_dtype : x.scalar_type();
  return kernels::conv3d_1x1x1(x.to(dtype), conv_->weight.to(dtype), conv_->bias.to(dtype));
}

// --- UNet3d --------------------------------------------------------------------------------------

UNet3dImpl::UNet3dImpl(const UNetOptions& options) : options_(options) {
  validate(options_);
  const int64_t base = options_.base_channels;
  const int64_t groups = options_.group_norm_groups;
  const bool fp32 = options_.fp32_pool_and_upsample;
  const auto& sp = options_.spatial;
  const KernelChoice& kernels = options_.kernels;
  inc_ = register_module("inc", DoubleConv(options_.in_channels, base, groups, sp, kernels));
  for (int l = 1; l <= options_.layers; ++l) {
    const int64_t c = base << l;  // channels of level l
    downs_.push_back(
        register_module("down" + std::to_string(l), Down(c / 2, c, groups, fp32, sp, kernels)));
  }
  for (int k = 1; k <= options_.layers; ++k) {
    const int64_t c = base << (options_.layers - k + 1);  // from level L-k+1 to level L-k
    ups_.push_back(
        register_module("up" + std::to_string(k), Up(c, c / 2, groups, fp32, sp, kernels)));
  }
  outc_ = register_module("outc", OutConv(base, options_.n_classes, kernels));
}

at::Tensor UNet3dImpl::forward(const at::Tensor& x) {
  const int64_t multiple = int64_t{1} << options_.layers;
  const bool ok = x.dim() == 5 && x.size(1) == options_.in_channels && x.size(2) % multiple == 0 &&
                  x.size(3) % multiple == 0 && x.size(4) % multiple == 0;
  if (!ok) {
    throw core::Error(fmt::format(
        "UNet3d input of shape {}: expected (N, {}, D, H, W) with D, H and W divisible by "
        "2^layers = {} (layers = {})",
        shape_string(x.sizes()), options_.in_channels, multiple, options_.layers));
  }
  // Each block runs plainly, or checkpointed with its parameters as extra node inputs. The
  // closures hold the blocks by shared_ptr: the recompute may outlive this call.
  auto run = [this](const torch::nn::Module& block, const nn::CheckpointBlock& fn,
                    at::TensorList inputs) {
    if (!options_.activation_checkpointing) return fn(inputs);
    return nn::checkpoint(fn, inputs, block.parameters());
  };

  std::vector<at::Tensor> skips;  // skips[l]: level l output (N, base*2^l, D/2^l, H/2^l, W/2^l)
  at::Tensor h =
      run(*inc_, [inc = inc_.ptr()](at::TensorList in) { return inc->forward(in[0]); }, {x});
  for (const Down& down : downs_) {
    skips.push_back(h);
    h = run(*down, [d = down.ptr()](at::TensorList in) { return d->forward(in[0]); }, {h});
  }
  for (std::size_t k = 0; k < ups_.size(); ++k) {
    const at::Tensor& skip = skips[skips.size() - 1 - k];
    h = run(*ups_[k], [up = ups_[k].ptr()](at::TensorList in) { return up->forward(in[0], in[1]); },
            {h, skip});
  }
  return run(*outc_, [outc = outc_.ptr()](at::TensorList in) { return outc->forward(in[0]); }, {h});
}

// --- Counts --------------------------------------------------------------------------------------

double unet_forward_flops(const UNetOptions& options, int64_t side) {
  validate(options);
  const int64_t multiple = int64_t{1} << options.layers;
  if (side < 1 || side % multiple != 0) {
    throw core::Error(
        fmt::format("volume side {} is not a positive multiple of 2^layers = {}", side, multiple));
  }
  auto channels = [&](int l) { return static_cast<double>(options.base_channels) * (1 << l); };
  auto voxels = [&](int l) {
    const double s = static_cast<double>(side >> l);
    return s * s * s;
  };
  const double c0 = channels(0);
  double macs = 27.0 * (options.in_channels * c0 + c0 * c0) * voxels(0);  // inc
  for (int l = 1; l <= options.layers; ++l) {
    const double ci = channels(l - 1), co = channels(l);
    macs += 27.0 * (ci * co + co * co) * voxels(l);                                  // down l
    macs += 8.0 * co * ci * voxels(l) + 27.0 * (co * ci + ci * ci) * voxels(l - 1);  // up at l
  }
  macs += c0 * options.n_classes * voxels(0);  // outc
  return 2.0 * macs;
}

// --- bf16 probe ----------------------------------------------------------------------------------

bool bf16_pool_and_upsample_work(const c10::Device& device) {
  try {
    torch::autograd::AutoGradMode no_grad(false);
    nn::AutocastGuard autocast_off(nn::AutocastState::current().disabled());
    const auto f32 = at::TensorOptions().device(device).dtype(at::kFloat);
    // Multiples of 1/16 below 3 and of 1/4 below 1: exact in bf16, so only rounding of the
    // bf16 results separates them from float32. Cin != Cout catches the 1.13 CPU bug that runs
    // ConvTranspose3d as a plain conv.
    const at::Tensor x =
        at::arange(2 * 4 * 4 * 4, f32).remainder(37).div(16).reshape({1, 2, 4, 4, 4});
    const at::Tensor w =
        at::arange(2 * 3 * 8, f32).remainder(7).sub(3).div(4).reshape({2, 3, 2, 2, 2});
    const at::Tensor b = at::arange(3, f32).div(4);
    const at::Tensor xb = x.to(at::kBFloat16);

    const at::Tensor pool_ref = at::max_pool3d(x, {2, 2, 2}, {2, 2, 2});
    const at::Tensor pool_bf16 = at::max_pool3d(xb, {2, 2, 2}, {2, 2, 2}).to(at::kFloat);
    if (pool_bf16.sizes() != pool_ref.sizes() || !pool_bf16.equal(pool_ref)) return false;

    const at::Tensor up_ref = at::conv_transpose3d(x, w, b, {2, 2, 2});
    const at::Tensor up_bf16 =
        at::conv_transpose3d(xb, w.to(at::kBFloat16), b.to(at::kBFloat16), {2, 2, 2})
            .to(at::kFloat);
    return up_bf16.sizes() == up_ref.sizes() && up_bf16.allclose(up_ref, 1e-2, 1e-2);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace scaffold::model
