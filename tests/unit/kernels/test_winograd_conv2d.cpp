// The Winograd F(4x4, 3x3) convolution against LibTorch's at::conv2d computed in float64 (an
// independent reference: its float64 CPU path is the im2col + GEMM slow_conv2d): output and both
// gradients within 2e-5 of the reference's largest magnitude (F(4,3)'s transforms scale by up to
// 5 and 1/24, so its float32 rounding is a few times F(2,3)'s: measured ~3e-6 on these shapes),
// on sizes that leave partial tiles at both edges, batch 1 and 2, unequal channel counts, more
// tiles than one block holds (blocks, threads and the weight gradient's partial sums), channel
// counts wide enough for the chunked schedule, and chunks that end inside a tile row.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_conv.hpp"
#include "kernels/winograd_conv2d.hpp"
#include "unit/kernels/conv_grads.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

using test::conv_grads;
using test::ConvGrads;

// (N, C, O, H, W)
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
class WinogradConv2d : public ::testing::TestWithParam<Shape> {};

TEST_P(WinogradConv2d, EqualsFloat64Conv2dInOutputAndGradients) {
  const auto [n, c, o, h, w] = GetParam();
  at::manual_seed(23);
  const at::Tensor x = at::randn({n, c, h, w}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor wt = at::randn({o, c, 3, 3}) * 0.1;
  const at::Tensor g = at::randn({n, o, h, w});
  ASSERT_TRUE(kernels::winograd_conv2d_supported(x, wt));
  const int64_t calls = kernels::winograd_conv2d_calls();
  // 256 KiB of chunk scratch splits the wide shapes into several chunks.
  for (const auto& [threads, chunk] :
       {std::make_tuple(1, int64_t{16} << 20), std::make_tuple(2, int64_t{16} << 20),
        std::make_tuple(2, int64_t{256} << 10)}) {
    // The products' register tiles for AVX-512 (2 threads, large chunks) and for AVX2 (the
    // others), whichever this CPU has.
    const int wide = threads == 2 && chunk == (int64_t{16} << 20) ? 1 : 0;
    SCOPED_TRACE(fmt::format("threads {}, chunk scratch {} bytes, {} register tiles", threads,
                             chunk, wide ? "AVX-512" : "AVX2"));
    at::set_num_threads(threads);
    kernels::set_winograd_chunk_bytes(chunk);
    kernels::simd::force_wide_registers(wide);
    const ConvGrads got = conv_grads(x, wt, g, [](const at::Tensor& a, const at::Tensor& b) {
      return kernels::winograd_conv2d(a, b);
    });
    const ConvGrads ref = conv_grads(x.to(at::kDouble), wt.to(at::kDouble), g.to(at::kDouble),
                                     [](const at::Tensor& a, const at::Tensor& b) {
                                       return at::conv2d(a, b, {}, /*stride=*/1, /*padding=*/1);
                                     });
    EXPECT_TRUE(test::tensors_close(got.y, ref.y, 2e-5, "output"));
    EXPECT_TRUE(test::tensors_close(got.dx, ref.dx, 2e-5, "input gradient"));
    EXPECT_TRUE(test::tensors_close(got.dw, ref.dw, 2e-5, "weight gradient"));
    EXPECT_TRUE(got.y.is_contiguous(at::MemoryFormat::ChannelsLast)) << "the output is NHWC";
  }
  EXPECT_EQ(kernels::winograd_conv2d_calls(), calls + 3);
  at::set_num_threads(2);
  kernels::set_winograd_chunk_bytes(int64_t{16} << 20);
  kernels::simd::force_wide_registers(-1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradConv2d,
    ::testing::Values(Shape{1, 16, 16, 8, 8},    // whole tiles
                      Shape{1, 16, 32, 7, 9},    // partial tiles at both edges, C != O
                      Shape{2, 32, 16, 6, 5},    // batch 2
                      Shape{2, 16, 16, 3, 2},    // one partial tile per sample
                      Shape{1, 16, 16, 30, 29},  // 8x8 = 64 tiles: several blocks of 54
                      Shape{2, 64, 64, 23, 21},  // 64+ output channels, blocks end mid-row
                      // C + O > 404: the chunked schedule (each point over a chunk of tiles),
                      // in chunks of 4 tiles that cross tile rows where the scratch is 256 KiB.
                      Shape{1, 256, 160, 7, 7}, Shape{2, 208, 224, 10, 11}));

TEST(WinogradConv2d, RefusesWhatItCannotRunAndSaysWhy) {
  const auto cl = [](const at::Tensor& t) { return t.contiguous(at::MemoryFormat::ChannelsLast); };
  const at::Tensor w = at::randn({16, 16, 3, 3});
  EXPECT_FALSE(kernels::winograd_conv2d_supported(at::randn({1, 16, 6, 6}), w))
      << "an NCHW input (the kernel reads channels-last rows)";
  EXPECT_FALSE(
      kernels::winograd_conv2d_supported(cl(at::randn({1, 8, 6, 6})), at::randn({16, 8, 3, 3})));
  EXPECT_FALSE(
      kernels::winograd_conv2d_supported(cl(at::randn({1, 16, 6, 6})), at::randn({16, 16, 1, 1})));
  EXPECT_FALSE(kernels::winograd_conv2d_supported(cl(at::randn({1, 16, 6, 6}).to(at::kDouble)),
                                                  w.to(at::kDouble)));
  try {
    kernels::winograd_conv2d(cl(at::randn({1, 8, 6, 6})), at::randn({16, 8, 3, 3}));
    ADD_FAILURE() << "8 input channels were accepted";
  } catch (const core::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1x8x6x6"), std::string::npos) << what;
    EXPECT_NE(what.find("multiples of 16"), std::string::npos) << what;
  }
}

// ResNet's `probe` (kernels::choose_conv3x3): each kernel that takes the layer timed once per
// shape, the verdict the fastest Winograd that beats LibTorch's by the margin, else LibTorch's.
TEST(Conv3x3Probe, TimesEachKernelThatTakesTheLayerOnceAndChoosesByTheTimes) {
  const auto measured = [] { return kernels::probe_verdicts().measurements(); };
  const at::Tensor x = at::randn({2, 32, 12, 12}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::randn({32, 32, 3, 3});
  const std::array<int64_t, 1> one{1};
  const bool dnnl =
      kernels::dnnl_conv2d_supported(x, w, one, one, kernels::DnnlAlgorithm::Winograd);
  const std::size_t before = measured().size();
  const int64_t calls = kernels::winograd_conv2d_calls();
  const kernels::Conv3x3Kernel chosen = kernels::choose_conv3x3(x, w);
  auto probes = measured();
  ASSERT_EQ(probes.size(), before + 1);
  const kernels::ProbeMeasurement& p = probes.back();
  EXPECT_EQ(p.key, "conv x 2x32x12x12 nhwc Float w 32x32x3x3 s1x1 p1x1");
  std::vector<std::string> kernels_timed;
  for (const kernels::ProbeTiming& t : p.result.timings) {
    kernels_timed.push_back(t.kernel);
    EXPECT_GT(t.ms, 0.0) << p.line();
  }
  const std::vector<std::string> with_dnnl{"winograd", "native_winograd", "libtorch"},
      without{"native_winograd", "libtorch"};
  EXPECT_EQ(kernels_timed, dnnl ? with_dnnl : without) << p.line();
  // The verdict from the times, independently of the probe's loop.
  const double libtorch_ms = p.result.timings.back().ms;
  std::string want = "libtorch";
  double want_ms = kernels::kWinogradMargin * libtorch_ms;
  for (std::size_t i = 0; i + 1 < p.result.timings.size(); ++i)
    if (p.result.timings[i].ms < want_ms) {
      want_ms = p.result.timings[i].ms;
      want = p.result.timings[i].kernel;
    }
  EXPECT_EQ(p.result.verdict, want) << p.line();
  EXPECT_EQ(kernels::to_string(chosen), want);
  EXPECT_EQ(kernels::winograd_conv2d_calls(), calls) << "the probe's runs counted as the model's";
  // Asked again with other values, through autograd inputs: remembered, not measured.
  EXPECT_EQ(kernels::choose_conv3x3(at::randn({2, 32, 12, 12})
                                        .contiguous(at::MemoryFormat::ChannelsLast)
                                        .requires_grad_(true),
                                    w),
            chosen);
  EXPECT_EQ(measured().size(), before + 1);
  // NCHW is another shape, which the native kernel does not take: without oneDNN's Winograd
  // (a CPU without AVX-512) nothing is timed and the line says so.
  const kernels::Conv3x3Kernel nchw = kernels::choose_conv3x3(at::randn({2, 32, 12, 12}), w);
  probes = measured();
  ASSERT_EQ(probes.size(), before + 2);
  EXPECT_EQ(probes.back().key, "conv x 2x32x12x12 nchw Float w 32x32x3x3 s1x1 p1x1");
  EXPECT_NE(nchw, kernels::Conv3x3Kernel::NativeWinograd);
  if (!dnnl) {
    EXPECT_EQ(probes.back().line(),
              "conv x 2x32x12x12 nchw Float w 32x32x3x3 s1x1 p1x1 -> libtorch");
    EXPECT_EQ(nchw, kernels::Conv3x3Kernel::LibTorch);
  }
}

}  // namespace
}  // namespace scaffold::model
