// 3x3x3 convolutions on ScaFFold's layer shapes: Winograd F(2x2x2, 3x3x3)
// (kernels/winograd_conv.hpp) against oneDNN's direct convolution (model/dnnl_conv.hpp, the U-Net's
// CPU default), forward alone and forward + both backward passes, float32, in the layout given
// (contiguous NCDHW or channels-last 3-D). The two run alternately, each repeat timing one of each;
// medians over the repeats and their ratio (winograd / onednn). Each shape's first call also gives
// the largest difference of output and gradients from oneDNN, relative to the largest magnitude.
// Legend: N batch, C -> O channels, S^3 voxels. With --resnet the 2-D kernel instead
// (kernels/winograd_conv2d.hpp, F(4x4, 3x3), channels-last) against at::conv2d (what ResNet's
// layers run otherwise: oneDNN's direct kernel through LibTorch) on ResNet's 3x3 stride-1 layers
// at 224^2 (S^2 pixels).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/threads.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/winograd_conv.hpp"
#include "kernels/winograd_conv2d.hpp"
#include "paired_timing.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t n, c, o, side;
};

at::Tensor conv(bool winograd, const at::Tensor& x, const at::Tensor& w) {
  if (x.dim() == 4) return winograd ? kernels::winograd_conv2d(x, w) : at::conv2d(x, w, {}, 1, 1);
  return winograd ? kernels::winograd_conv3d(x, w) : kernels::dnnl_conv3d(x, w, 1);
}

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"Winograd F(2,3) 3-D convolution against oneDNN's direct one (CPU, float32)"};
  int threads = 2;
  int repeats = 9;
  int warmup = 2;
  bool channels_last = false;
  bool resnet = false;
  std::vector<int64_t> one;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  app.add_flag("--channels-last", channels_last, "activations in channels-last 3-D memory");
  app.add_flag("--resnet", resnet,
               "the 2-D F(4x4, 3x3) kernel on ResNet's 3x3 layers (channels-last) against "
               "at::conv2d");
  app.add_option("--shape", one, "one shape only: N C O S")->expected(4);
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());

  // ScaFFold's U-Net levels at scale 5 base 64 and scale 6 base 16 (C = base * 2^l at side
  // 2^(scale - l)), plus the first conv of a level after the skip concatenation (2C -> C).
  std::vector<Shape> shapes = {{1, 64, 64, 32},   {1, 128, 64, 32}, {1, 128, 128, 16},
                               {1, 256, 128, 16}, {1, 64, 128, 16}, {1, 256, 256, 8},
                               {1, 512, 512, 4},  {1, 16, 16, 64},  {1, 32, 32, 32},
                               {1, 64, 64, 16},   {2, 64, 64, 32},  {2, 16, 16, 64}};
  // ResNet's stride-1 3x3 layers at 224^2: one per stage (18 and 50 alike), batch 8 and 32.
  if (resnet)
    shapes = {{8, 64, 64, 56},  {8, 128, 128, 28},  {8, 256, 256, 14},  {8, 512, 512, 7},
              {32, 64, 64, 56}, {32, 128, 128, 28}, {32, 256, 256, 14}, {32, 512, 512, 7}};
  if (!one.empty()) shapes = {{one[0], one[1], one[2], one[3]}};
  if (resnet) channels_last = true;
  fmt::print(
      "# threads {}, {}, {} repeats after {} warm-up, median ms; ratio = winograd / onednn\n",
      at::get_num_threads(), channels_last ? "channels-last" : "contiguous", repeats, warmup);
  fmt::print("{:<18} {:>9} {:>9} {:>6} {:>10} {:>10} {:>6} {:>9} {:>9} {:>9}\n", "shape",
             "dnnl_fwd", "wino_fwd", "ratio", "dnnl_step", "wino_step", "ratio", "err_y", "err_dx",
             "err_dw");
  for (const Shape& s : shapes) {
    torch::manual_seed(1);
    const std::vector<int64_t> space(resnet ? 2 : 3, s.side), kernel(resnet ? 2 : 3, 3);
    const auto sizes = [&](int64_t a, int64_t b, const std::vector<int64_t>& rest) {
      std::vector<int64_t> v{a, b};
      v.insert(v.end(), rest.begin(), rest.end());
      return v;
    };
    at::Tensor x = at::randn(sizes(s.n, s.c, space));
    if (channels_last)
      x = x.contiguous(resnet ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
    x.requires_grad_(true);
    const at::Tensor w = (at::randn(sizes(s.o, s.c, kernel)) * 0.05).requires_grad_(true);
    const at::Tensor r = at::randn(sizes(s.n, s.o, space));
    double ey, edx, edw;
    {
      const at::Tensor y1 = conv(true, x, w), y0 = conv(false, x, w);
      const auto g1 = torch::autograd::grad({y1}, {x, w}, {r});
      const auto g0 = torch::autograd::grad({y0}, {x, w}, {r});
      ey = rel_diff(y1, y0);
      edx = rel_diff(g1[0], g0[0]);
      edw = rel_diff(g1[1], g0[1]);
    }
    const bench::Paired m = bench::alternate(warmup, repeats, [&](bool winograd) {
      return bench::time_op([&] { return conv(winograd, x, w); }, {x, w}, r);
    });
    const double mdf = m.b.forward_ms, mwf = m.a.forward_ms, mds = m.b.step_ms, mws = m.a.step_ms;
    fmt::print(
        "{:<18} {:>9.2f} {:>9.2f} {:>6.2f} {:>10.2f} {:>10.2f} {:>6.2f} {:>9.1e} {:>9.1e} "
        "{:>9.1e}\n",
        fmt::format("{}x{}->{}x{}^{}", s.n, s.c, s.o, s.side, space.size()), mdf, mwf, mwf / mdf,
        mds, mws, mws / mds, ey, edx, edw);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_winograd_conv: {}\n", e.what());
  return 1;
}
