// The kernel keys resolved once (workloads/scaffold/model/kernel_choice.hpp): auto per device,
// layout and precision, the named kernels, the errors naming each key, the bf16 fallback from
// Winograd, and the tally of what ran (kernels/kernel_use.hpp), including the one fallback line.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/kernel_use.hpp"
#include "workloads/scaffold/model/kernel_choice.hpp"

namespace scaffold::model {
namespace {

KernelTarget cpu_target(bool onednn = true, bool bf16 = false, bool channels_last = false) {
  KernelTarget t;
  t.cpu = true;
  t.device = "cpu";
  t.onednn_built = onednn;
  t.bf16_autocast = bf16;
  t.channels_last = channels_last;
  return t;
}

KernelTarget cuda_target() {
  KernelTarget t;
  t.cpu = false;
  t.device = "cuda:0";
  return t;
}

TEST(KernelChoice, AutoIsTheMeasuredFastestOnTheCpuAndLibTorchElsewhere) {
  const KernelChoice cpu = resolve_kernel_choice({}, cpu_target());
  EXPECT_EQ(cpu.names(), (std::vector<std::string>{"conv=probe", "upconv=gemm", "groupnorm=unfused",
                                                   "pool=native", "head=gemm", "loss=fused",
                                                   "optimizer=fused"}));
  EXPECT_TRUE(cpu.fallbacks.empty());
  ASSERT_NE(cpu.use, nullptr);
  const KernelChoice gpu = resolve_kernel_choice({}, cuda_target());
  EXPECT_EQ(gpu.names(),
            (std::vector<std::string>{"conv=libtorch", "upconv=libtorch", "groupnorm=unfused",
                                      "pool=libtorch", "head=libtorch", "loss=libtorch",
                                      "optimizer=libtorch"}));
  // Only Adam has a fused step: auto is LibTorch's SGD.
  KernelKeys sgd;
  sgd.optimizer = "SGD";
  EXPECT_EQ(resolve_kernel_choice(sgd, cpu_target()).optimizer, OptimizerKernel::LibTorch);
  // The optimizer key is matched in any case, as the config takes it.
  KernelKeys adam;
  adam.optimizer = "adam";
  EXPECT_EQ(resolve_kernel_choice(adam, cpu_target()).optimizer, OptimizerKernel::Fused);
}

TEST(KernelChoice, NamedKernelsAreTakenAsNamed) {
  KernelKeys k;
  k.conv = "onednn";
  k.upconv = "libtorch";
  k.groupnorm = "fused";
  k.pool = "libtorch";
  k.head = "libtorch";
  k.loss = "libtorch";
  k.optimizer_kernel = "libtorch";
  EXPECT_EQ(resolve_kernel_choice(k, cpu_target()).names(),
            (std::vector<std::string>{"conv=onednn", "upconv=libtorch", "groupnorm=fused",
                                      "pool=libtorch", "head=libtorch", "loss=libtorch",
                                      "optimizer=libtorch"}));
  k.conv = "libtorch";
  k.upconv = "gemm";
  k.pool = "native";
  k.head = "gemm";
  k.loss = "fused";
  k.optimizer_kernel = "fused";
  const KernelChoice c = resolve_kernel_choice(k, cpu_target(/*onednn=*/false));
  EXPECT_EQ(c.conv, ConvKernel::LibTorch);
  EXPECT_EQ(c.upconv, UpconvKernel::Gemm);
  EXPECT_EQ(c.pool, PoolKernel::Native);
  EXPECT_EQ(c.head, HeadKernel::Gemm);
  EXPECT_EQ(c.loss, LossKernel::Fused);
  EXPECT_EQ(c.optimizer, OptimizerKernel::Fused);
}

TEST(KernelChoice, GroupNormIsUnfusedUnlessFusedIsNamed) {
  // Opt-in: the fused kernel measured slower in whole steps, on every target.
  for (const KernelTarget& t : {cpu_target(), cpu_target(true, false, /*cl=*/true), cuda_target()})
    EXPECT_EQ(resolve_kernel_choice({}, t).norm, NormKernel::Unfused) << t.device;
  KernelKeys k;
  k.groupnorm = "unfused";
  EXPECT_EQ(resolve_kernel_choice(k, cpu_target()).norm, NormKernel::Unfused);
  k.groupnorm = "fused";
  EXPECT_EQ(resolve_kernel_choice(k, cpu_target()).norm, NormKernel::Fused);
}

TEST(KernelChoice, WinogradUnderBf16AutocastFallsBackOnceAndSaysWhy) {
  for (const bool onednn : {true, false}) {
    for (const char* conv : {"auto", "probe", "winograd"}) {
      KernelKeys k;
      k.conv = conv;
      const KernelChoice c = resolve_kernel_choice(k, cpu_target(onednn, /*bf16=*/true));
      EXPECT_EQ(c.conv, onednn ? ConvKernel::OneDnn : ConvKernel::LibTorch) << conv;
      ASSERT_EQ(c.fallbacks.size(), 1u) << conv;
      EXPECT_EQ(c.fallbacks[0], std::string("conv: ") + (onednn ? "onednn" : "libtorch") +
                                    " instead of " +
                                    (std::string(conv) == "winograd" ? "winograd" : "probe") +
                                    " (bf16 autocast: Winograd F(2,3) runs float32 only)");
    }
  }
  // float32: no fallback.
  EXPECT_TRUE(resolve_kernel_choice({}, cpu_target(true, false)).fallbacks.empty());
}

// On a CPU without bf16 products bf16 autocast runs float32 convolutions (DoubleConvImpl::conv):
// the Winograd and the probe stay chosen, with no fallback.
TEST(KernelChoice, WinogradUnderBf16AutocastStaysWhereTheCpuHasNoBf16Products) {
  for (const char* key : {"auto", "probe", "winograd"}) {
    KernelKeys k;
    k.conv = key;
    KernelTarget t = cpu_target(true, /*bf16=*/true);
    t.bf16_products = false;
    const KernelChoice c = resolve_kernel_choice(k, t);
    EXPECT_EQ(c.conv, std::string(key) == "winograd" ? ConvKernel::Winograd : ConvKernel::Probe)
        << key;
    EXPECT_TRUE(c.fallbacks.empty()) << key;
  }
}

TEST(KernelChoice, AKernelThatCannotRunHereIsAnErrorNamingItsKey) {
  const auto expect_error = [](KernelKeys k, const KernelTarget& t, const std::string& what) {
    try {
      resolve_kernel_choice(k, t);
      ADD_FAILURE() << "no error, expected: " << what;
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const auto keys = [](std::string KernelKeys::*key, const char* value) {
    KernelKeys k;
    k.*key = value;
    return k;
  };
  expect_error(keys(&KernelKeys::conv, "onednn"), cuda_target(),
               "conv_kernel: onednn runs on the CPU, this run trains on cuda:0");
  expect_error(keys(&KernelKeys::conv, "winograd"), cuda_target(),
               "conv_kernel: winograd runs on the CPU");
  expect_error(keys(&KernelKeys::conv, "probe"), cuda_target(),
               "conv_kernel: probe runs on the CPU");
  expect_error(keys(&KernelKeys::conv, "onednn"), cpu_target(/*onednn=*/false),
               "conv_kernel: onednn, but this build has no oneDNN");
  expect_error(
      keys(&KernelKeys::conv, "fast"), cpu_target(),
      "conv_kernel: 'fast' is not allowed; expected auto, probe, winograd, onednn or libtorch");
  expect_error(keys(&KernelKeys::upconv, "gemm"), cuda_target(),
               "upconv_kernel: gemm runs on the CPU");
  expect_error(keys(&KernelKeys::pool, "native"), cuda_target(),
               "pool_kernel: native runs on the CPU");
  expect_error(keys(&KernelKeys::pool, "max"), cpu_target(), "pool_kernel: 'max' is not allowed");
  expect_error(keys(&KernelKeys::head, "gemm"), cuda_target(), "head_kernel: gemm runs on the CPU");
  expect_error(keys(&KernelKeys::head, "conv"), cpu_target(),
               "head_kernel: 'conv' is not allowed; expected auto, gemm or libtorch");
  expect_error(keys(&KernelKeys::loss, "fused"), cuda_target(),
               "loss_kernel: fused runs on the CPU");
  expect_error(keys(&KernelKeys::loss, "fast"), cpu_target(), "loss_kernel: 'fast' is not allowed");
  expect_error(keys(&KernelKeys::optimizer_kernel, "fused"), cuda_target(),
               "optimizer_kernel: fused runs on the CPU");
  KernelKeys sgd = keys(&KernelKeys::optimizer_kernel, "fused");
  sgd.optimizer = "SGD";
  expect_error(sgd, cpu_target(),
               "optimizer_kernel: fused is Adam's one-pass kernel, this run's optimizer is SGD");
  expect_error(keys(&KernelKeys::groupnorm, "fused"), cpu_target(true, false, /*cl=*/true),
               "groupnorm_kernel: 'fused' runs on the CPU with contiguous tensors only (this run: "
               "cpu, channels-last)");
  expect_error(keys(&KernelKeys::groupnorm, "fused"), cuda_target(),
               "groupnorm_kernel: 'fused' runs on the CPU with contiguous tensors only (this run: "
               "cuda:0)");
  expect_error(keys(&KernelKeys::groupnorm, "fast"), cpu_target(),
               "groupnorm_kernel: 'fast' is not allowed; expected auto, fused or unfused");
}

TEST(KernelUse, CountsEachOpsKernelsInTheOrderTheyFirstRan) {
  kernels::KernelUse use;
  use.chose("conv", {"winograd", "onednn", "libtorch"});
  use.chose("pool", {"native"});
  for (int i = 0; i < 3; ++i) use.ran("conv", "winograd");
  use.ran("pool", "native");
  for (int i = 0; i < 2; ++i) use.ran("conv", "onednn");
  EXPECT_EQ(use.summary(),
            (std::vector<std::string>{"conv=winograd x3, onednn x2", "pool=native x1"}));
  EXPECT_TRUE(use.fallbacks().empty());  // every kernel that ran was among the chosen
  const auto counts = use.counts();
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[2].op, "conv");
  EXPECT_EQ(counts[2].kernel, "onednn");
  EXPECT_EQ(counts[2].calls, 2);
}

TEST(KernelUse, AFallbackIsRecordedOnceWithItsReason) {
  kernels::KernelUse use;
  use.chose("pool", {"native"});
  use.ran("pool", "native");
  for (int i = 0; i < 4; ++i) use.ran("pool", "libtorch", "a channels-last input");
  use.ran("head", "gemm");  // an op with no registered choice: counted, never a fallback
  EXPECT_EQ(use.fallbacks(),
            (std::vector<std::string>{"pool: libtorch instead of native (a channels-last input)"}));
  EXPECT_EQ(use.summary(),
            (std::vector<std::string>{"pool=native x1, libtorch x4", "head=gemm x1"}));
}

}  // namespace
}  // namespace scaffold::model
