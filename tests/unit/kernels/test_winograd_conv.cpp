// The Winograd F(2,3) convolution against LibTorch's at::conv3d computed in float64 (an
// independent reference: its float64 CPU path is slow_conv3d, im2col + GEMM): output and both
// gradients within 1e-5 of the reference's largest magnitude, on sizes that leave partial tiles at
// every edge, batch 1 and 2, unequal channel counts, contiguous and channels-last inputs, and more
// tiles than one block holds (so blocks, threads and the weight-gradient partial sums all run),
// and channel counts wide enough for the other schedule (every tile transformed first).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <tuple>

#include "core/error.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/simd.hpp"
#include "kernels/winograd_conv.hpp"
#include "unit/kernels/conv_grads.hpp"
#include "unit/kernels/probe_expectations.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

using test::conv_grads;
using test::ConvGrads;

// (N, C, O, D, H, W, channels-last)
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;
class WinogradConv : public ::testing::TestWithParam<Shape> {};

TEST_P(WinogradConv, EqualsFloat64Conv3dInOutputAndGradients) {
  const auto [n, c, o, d, h, w, cl] = GetParam();
  at::manual_seed(21);
  at::Tensor x = at::randn({n, c, d, h, w});
  if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor wt = at::randn({o, c, 3, 3, 3}) * 0.1;
  const at::Tensor g = at::randn({n, o, d, h, w});
  ASSERT_TRUE(kernels::winograd_conv3d_supported(x, wt));
  // 1 MiB of chunk scratch splits the wide shapes into several chunks (17 tiles each).
  for (const auto& [threads, chunk] :
       {std::make_tuple(1, int64_t{16} << 20), std::make_tuple(2, int64_t{16} << 20),
        std::make_tuple(2, int64_t{1} << 20)}) {
    // The products' register tiles for AVX-512 (2 threads, large chunks) and for AVX2 (the
    // others), whichever this CPU has.
    const int wide = threads == 2 && chunk == (int64_t{16} << 20) ? 1 : 0;
    SCOPED_TRACE(fmt::format("threads {}, chunk scratch {} bytes, {} register tiles", threads,
                             chunk, wide ? "AVX-512" : "AVX2"));
    at::set_num_threads(threads);
    kernels::set_winograd_chunk_bytes(chunk);
    kernels::simd::force_wide_registers(wide);
    const ConvGrads got = conv_grads(x, wt, g, [](const at::Tensor& a, const at::Tensor& b) {
      return kernels::winograd_conv3d(a, b);
    });
    const ConvGrads ref = conv_grads(x.to(at::kDouble), wt.to(at::kDouble), g.to(at::kDouble),
                                     [](const at::Tensor& a, const at::Tensor& b) {
                                       return at::conv3d(a, b, {}, /*stride=*/1, /*padding=*/1);
                                     });
    EXPECT_TRUE(test::tensors_close(got.y, ref.y, 1e-5, "output"));
    EXPECT_TRUE(test::tensors_close(got.dx, ref.dx, 1e-5, "input gradient"));
    EXPECT_TRUE(test::tensors_close(got.dw, ref.dw, 1e-5, "weight gradient"));
    EXPECT_EQ(got.y.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !got.y.is_contiguous(), cl)
        << "the output keeps the input's memory format";
    EXPECT_EQ(got.dx.is_contiguous(), !cl) << "so does the input gradient";
  }
  at::set_num_threads(2);
  kernels::set_winograd_chunk_bytes(int64_t{16} << 20);
  kernels::simd::force_wide_registers(-1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradConv,
    ::testing::Values(Shape{1, 16, 16, 8, 8, 8, false},     // whole tiles
                      Shape{1, 16, 32, 7, 5, 9, false},     // partial tiles on every axis, C != O
                      Shape{2, 32, 16, 6, 7, 4, false},     // batch 2
                      Shape{1, 16, 16, 7, 6, 5, true},      // channels-last input
                      Shape{1, 16, 16, 16, 14, 13, false},  // 8x7x7 = 392 tiles: several blocks
                      Shape{2, 48, 16, 3, 3, 3, true},      // one tile per sample
                      // Rows of 16+ voxels (NCDHW rows move in 16 x 16 register transposes, the
                      // rest one voxel at a time), and blocks that end inside a tile row.
                      Shape{1, 16, 16, 4, 5, 37, false}, Shape{2, 32, 16, 3, 4, 35, true},
                      // 64+ output channels (the four-vector product kernel) in blocks of 30 tiles.
                      Shape{1, 64, 64, 9, 8, 7, true},
                      // C + O > 227: the schedule that transforms a chunk of tiles first.
                      Shape{1, 128, 112, 5, 6, 7, false}, Shape{2, 144, 96, 4, 3, 5, true}));

TEST(WinogradConv, RefusesWhatItCannotRunAndSaysWhy) {
  const at::Tensor x = at::randn({1, 8, 4, 4, 4}), w = at::randn({16, 8, 3, 3, 3});
  EXPECT_FALSE(kernels::winograd_conv3d_supported(x, w));  // 8 input channels
  EXPECT_FALSE(kernels::winograd_conv3d_supported(at::randn({1, 16, 4, 4, 4}),
                                                  at::randn({16, 16, 1, 1, 1})));
  EXPECT_FALSE(kernels::winograd_conv3d_supported(at::randn({1, 16, 4, 4, 4}).to(at::kDouble),
                                                  at::randn({16, 16, 3, 3, 3}).to(at::kDouble)));
  try {
    kernels::winograd_conv3d(x, w);
    ADD_FAILURE() << "8 input channels were accepted";
  } catch (const core::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1x8x4x4x4"), std::string::npos) << what;
    EXPECT_NE(what.find("multiples of 16"), std::string::npos) << what;
  }
}

// A batch whose first sample holds kProbeTiles tiles is timed on that sample alone (less memory
// at the step's peak), and the key says so; a smaller one on as many samples as reach it.
TEST(WinogradConv, TheProbeTimesALargeBatchOnTheSamplesItNeeds) {
  const at::Tensor w = at::randn({16, 16, 3, 3, 3});
  EXPECT_EQ(kernels::winograd_probe_samples(at::empty({2, 16, 32, 32, 32})), 1);  // 4096 tiles
  EXPECT_EQ(kernels::winograd_probe_samples(at::empty({4, 16, 30, 32, 32})), 2);  // 3840 each
  EXPECT_EQ(kernels::winograd_probe_samples(at::empty({3, 16, 16, 16, 16})), 3);  // the batch
  const auto measured = [] { return kernels::probe_verdicts().measurements(); };
  const std::size_t before = measured().size();
  kernels::winograd_conv3d_pays(at::randn({2, 16, 32, 32, 32}), w);
  ASSERT_EQ(measured().size(), before + 1);
  EXPECT_EQ(measured().back().key,
            "conv3d x 2x16x32x32x32 ncdhw w 16x16x3x3x3, timed on 1 of 2 samples");
  kernels::winograd_conv3d_pays(at::randn({1, 16, 32, 32, 32}), w);
  ASSERT_EQ(measured().size(), before + 2);
  EXPECT_EQ(measured().back().key, "conv3d x 1x16x32x32x32 ncdhw w 16x16x3x3x3");
}

// Where it is used (the U-Net's `probe`): a measurement per shape on this machine, not a rule.
TEST(WinogradConv, TheProbeMeasuresEachShapeOnceAndDecidesByItsTimes) {
  const auto measured = [] { return kernels::probe_verdicts().measurements(); };
  const at::Tensor x = at::randn({1, 16, 10, 10, 10}), w = at::randn({32, 16, 3, 3, 3});
  const std::size_t before = measured().size();
  const int64_t calls = kernels::winograd_conv3d_calls();
  const bool verdict = kernels::winograd_conv3d_pays(x, w);
  const auto probes = measured();
  ASSERT_EQ(probes.size(), before + 1);
  const kernels::ProbeMeasurement& p = probes.back();
  EXPECT_EQ(p.key, "conv3d x 1x16x10x10x10 ncdhw w 32x16x3x3x3");
  test::expect_decided_by_times(p, "winograd", kernels::dnnl_conv3d_built() ? "onednn" : "libtorch",
                                kernels::kWinogradMargin);
  EXPECT_EQ(verdict, p.result.verdict == "winograd");
  EXPECT_EQ(kernels::winograd_conv3d_calls(), calls) << "the probe's runs counted as the model's";
  // Asked again with other values, through autograd inputs and in inference mode (validation):
  // remembered, not measured.
  EXPECT_EQ(kernels::winograd_conv3d_pays(at::randn({1, 16, 10, 10, 10}).requires_grad_(true), w),
            verdict);
  {
    const c10::InferenceMode inference;
    EXPECT_EQ(kernels::winograd_conv3d_pays(at::randn({1, 16, 10, 10, 10}), w), verdict);
  }
  EXPECT_EQ(measured().size(), before + 1);
  // Another memory format is another shape, first met here in inference mode: measured all the
  // same (the probe copies its inputs out of inference mode and turns autograd on).
  {
    const c10::InferenceMode inference;
    kernels::winograd_conv3d_pays(
        at::randn({1, 16, 10, 10, 10}).contiguous(at::MemoryFormat::ChannelsLast3d), w);
  }
  ASSERT_EQ(measured().size(), before + 2);
  EXPECT_EQ(measured().back().key, "conv3d x 1x16x10x10x10 ndhwc w 32x16x3x3x3");
  // What Winograd does not take is not measured.
  EXPECT_FALSE(
      kernels::winograd_conv3d_pays(at::randn({1, 8, 6, 6, 6}), at::randn({16, 8, 3, 3, 3})));
  EXPECT_EQ(measured().size(), before + 2);
}

}  // namespace
}  // namespace scaffold::model
