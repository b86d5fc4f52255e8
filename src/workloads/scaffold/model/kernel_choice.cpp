// resolve_kernel_choice and the names of kernel_choice.hpp: every *_kernel key parsed here, once.
#include "workloads/scaffold/model/kernel_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.hpp"
#include "core/log.hpp"

namespace scaffold::model {
namespace {

// A key's value among `allowed` (auto first), or a core::Error naming the key.
void check_allowed(const char* key, const std::string& value,
                   const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed)
    if (value == a) return;
  std::string list;
  for (std::size_t i = 0; i < allowed.size(); ++i)
    list += std::string(i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
  throw core::Error(fmt::format("{}: '{}' is not allowed; expected {}", key, value, list));
}

// A CPU-only kernel named for a run elsewhere.
[[noreturn]] void cpu_only(const char* key, const std::string& value, const KernelTarget& t) {
  throw core::Error(
      fmt::format("{}: {} runs on the CPU, this run trains on {}", key, value, t.device));
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

const char* to_string(ConvKernel k) {
  switch (k) {
    case ConvKernel::Winograd:
      return "winograd";
    case ConvKernel::Probe:
      return "probe";
    case ConvKernel::OneDnn:
      return "onednn";
    case ConvKernel::LibTorch:
      break;
  }
  return "libtorch";
}
const char* to_string(UpconvKernel k) {
  return k == UpconvKernel::Gemm ? "gemm" : "libtorch";
}
const char* to_string(NormKernel k) {
  return k == NormKernel::Fused ? "fused" : "unfused";
}
const char* to_string(PoolKernel k) {
  return k == PoolKernel::Native ? "native" : "libtorch";
}
const char* to_string(HeadKernel k) {
  return k == HeadKernel::Gemm ? "gemm" : "libtorch";
}
const char* to_string(LossKernel k) {
  return k == LossKernel::Fused ? "fused" : "libtorch";
}
const char* to_string(OptimizerKernel k) {
  return k == OptimizerKernel::Fused ? "fused" : "libtorch";
}

std::vector<std::string> KernelChoice::names() const {
  return {
      std::string("conv=") + to_string(conv),          std::string("upconv=") + to_string(upconv),
      std::string("groupnorm=") + to_string(norm),     std::string("pool=") + to_string(pool),
      std::string("head=") + to_string(head),          std::string("loss=") + to_string(loss),
      std::string("optimizer=") + to_string(optimizer)};
}

void KernelChoice::register_choices() const {
  if (!use) return;
  // Winograd leaves the layers it does not take (and the probe those where it does not pay) to
  // oneDNN, and without oneDNN (or for an input oneDNN does not take) to LibTorch; oneDNN leaves
  // what it does not take to LibTorch.
  if (conv == ConvKernel::Winograd || conv == ConvKernel::Probe)
    use->chose("conv", {"winograd", "onednn", "libtorch"});
  else
    use->chose("conv", {to_string(conv)});
  use->chose("upconv", {to_string(upconv)});
  use->chose("groupnorm", {to_string(norm)});
  use->chose("pool", {to_string(pool)});
  use->chose("head", {to_string(head)});
  use->chose("loss", {to_string(loss)});
  use->chose("optimizer", {to_string(optimizer)});
}

void KernelChoice::ran(const char* op, const char* kernel, const char* why) const {
  if (use) use->ran(op, kernel, why);
}

KernelChoice resolve_kernel_choice(const KernelKeys& keys, const KernelTarget& t) {
  KernelChoice k;

  check_allowed("conv_kernel", keys.conv, kernel_values::kConv);
  if (keys.conv == "auto") {
    k.conv = t.cpu ? ConvKernel::Probe : ConvKernel::LibTorch;
  } else if (keys.conv == "winograd" || keys.conv == "probe") {
    if (!t.cpu) cpu_only("conv_kernel", keys.conv, t);
    k.conv = keys.conv == "probe" ? ConvKernel::Probe : ConvKernel::Winograd;
  } else if (keys.conv == "onednn") {
    if (!t.cpu) cpu_only("conv_kernel", keys.conv, t);
    if (!t.onednn_built)
      throw core::Error(
          "conv_kernel: onednn, but this build has no oneDNN (install libdnnl-dev and rebuild)");
    k.conv = ConvKernel::OneDnn;
  }
  if ((k.conv == ConvKernel::Winograd || k.conv == ConvKernel::Probe) && t.bf16_autocast &&
      t.bf16_products) {
    // Winograd F(2,3) takes float32 only: under bf16 autocast no layer could run it (on a CPU
    // without bf16 products the convolutions are float32 ones: DoubleConvImpl::conv).
    const ConvKernel chosen = k.conv;
    k.conv = t.onednn_built ? ConvKernel::OneDnn : ConvKernel::LibTorch;
    k.fallbacks.push_back(
        fmt::format("conv: {} instead of {} (bf16 autocast: Winograd F(2,3) runs float32 only)",
                    to_string(k.conv), to_string(chosen)));
  }

  check_allowed("upconv_kernel", keys.upconv, kernel_values::kUpconv);
  if (keys.upconv == "gemm" && !t.cpu) cpu_only("upconv_kernel", keys.upconv, t);
  // LibTorch 1.13's CPU conv_transpose3d is col2vol at every batch size; one matrix product per
  // sample and a scatter measured 1-10 % faster whole steps in float32 (docs/performance.md), and
  // under bf16 autocast it runs in bf16 where LibTorch's needs a float32 detour.
  k.upconv = keys.upconv == "gemm" || (keys.upconv == "auto" && t.cpu) ? UpconvKernel::Gemm
                                                                       : UpconvKernel::LibTorch;

  check_allowed("groupnorm_kernel", keys.groupnorm, kernel_values::kGroupNorm);
  if (keys.groupnorm == "fused" && (!t.cpu || t.channels_last))
    throw core::Error(fmt::format(
        "groupnorm_kernel: 'fused' runs on the CPU with contiguous tensors only (this run: {}{}); "
        "use auto or unfused",
        t.device, t.channels_last ? ", channels-last" : ""));
  // auto: unfused. Measured in whole training steps on a quiet machine (docs/performance.md) the
  // fused kernel was 2-6 % slower than LibTorch's group_norm + relu_, so it is opt-in.
  k.norm = keys.groupnorm == "fused" ? NormKernel::Fused : NormKernel::Unfused;

  check_allowed("pool_kernel", keys.pool, kernel_values::kPool);
  if (keys.pool == "native" && !t.cpu) cpu_only("pool_kernel", keys.pool, t);
  // Faster than LibTorch's forward and backward on every pooled shape measured
  // (docs/performance.md).
  k.pool = keys.pool == "native" || (keys.pool == "auto" && t.cpu) ? PoolKernel::Native
                                                                   : PoolKernel::LibTorch;

  check_allowed("head_kernel", keys.head, kernel_values::kHead);
  if (keys.head == "gemm" && !t.cpu) cpu_only("head_kernel", keys.head, t);
  k.head = keys.head == "gemm" || (keys.head == "auto" && t.cpu) ? HeadKernel::Gemm
                                                                 : HeadKernel::LibTorch;

  check_allowed("loss_kernel", keys.loss, kernel_values::kLoss);
  if (keys.loss == "fused" && !t.cpu) cpu_only("loss_kernel", keys.loss, t);
  k.loss = keys.loss == "fused" || (keys.loss == "auto" && t.cpu) ? LossKernel::Fused
                                                                  : LossKernel::LibTorch;

  check_allowed("optimizer_kernel", keys.optimizer_kernel, kernel_values::kOptimizer);
  const bool adam = upper(keys.optimizer) == "ADAM";
  if (keys.optimizer_kernel == "fused") {
    if (!t.cpu) cpu_only("optimizer_kernel", keys.optimizer_kernel, t);
    if (!adam)
      throw core::Error(fmt::format(
          "optimizer_kernel: fused is Adam's one-pass kernel, this run's optimizer is {}; use "
          "auto or libtorch",
          keys.optimizer));
  }
  // auto: the one-pass Adam on the CPU (kernels/fused_adam.hpp); off the CPU it would step as
  // LibTorch's Adam anyway.
  k.optimizer =
      adam && (keys.optimizer_kernel == "fused" || (keys.optimizer_kernel == "auto" && t.cpu))
          ? OptimizerKernel::Fused
          : OptimizerKernel::LibTorch;

  for (const std::string& line : k.fallbacks) LOG_INFO("kernel fallback, {}", line);
  k.use = std::make_shared<kernels::KernelUse>();
  k.register_choices();
  return k;
}

}  // namespace scaffold::model
