// 3x3x3 convolutions on ScaFFold's layer shapes: Winograd F(2x2x2, 3x3x3)
// (kernels/winograd_conv.hpp) against oneDNN's direct convolution (model/dnnl_conv.hpp, the U-Net's
// CPU default), forward alone and forward + both backward passes, float32, in the layout given
// (contiguous NCDHW or channels-last 3-D). The two run alternately, each repeat timing one of each;
// medians over the repeats and their ratio (winograd / onednn). Each shape's first call also gives
// the largest difference of output and gradients from oneDNN, relative to the largest magnitude.
// Legend: N batch, C -> O channels, S^3 voxels.
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
#include "paired_timing.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t n, c, o, side;
};

at::Tensor conv(bool winograd, const at::Tensor& x, const at::Tensor& w) {
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
  std::vector<int64_t> one;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  app.add_flag("--channels-last", channels_last, "activations in channels-last 3-D memory");
  app.add_option("--shape", one, "one shape only: N C O S")->expected(4);
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());

  // ScaFFold's U-Net levels at scale 5 base 64 and scale 6 base 16 (C = base * 2^l at side
  // 2^(scale - l)), plus the first conv of a level after the skip concatenation (2C -> C).
  std::vector<Shape> shapes = {{1, 64, 64, 32},   {1, 128, 64, 32}, {1, 128, 128, 16},
                               {1, 256, 128, 16}, {1, 64, 128, 16}, {1, 256, 256, 8},
                               {1, 512, 512, 4},  {1, 16, 16, 64},  {1, 32, 32, 32},
                               {1, 64, 64, 16},   {2, 64, 64, 32},  {2, 16, 16, 64}};
  if (!one.empty()) shapes = {{one[0], one[1], one[2], one[3]}};
  fmt::print(
      "# threads {}, {}, {} repeats after {} warm-up, median ms; ratio = winograd / onednn\n",
      at::get_num_threads(), channels_last ? "channels-last" : "contiguous", repeats, warmup);
  fmt::print("{:<18} {:>9} {:>9} {:>6} {:>10} {:>10} {:>6} {:>9} {:>9} {:>9}\n", "shape",
             "dnnl_fwd", "wino_fwd", "ratio", "dnnl_step", "wino_step", "ratio", "err_y", "err_dx",
             "err_dw");
  for (const Shape& s : shapes) {
    torch::manual_seed(1);
    at::Tensor x = at::randn({s.n, s.c, s.side, s.side, s.side});
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
    x.requires_grad_(true);
    const at::Tensor w = (at::randn({s.o, s.c, 3, 3, 3}) * 0.05).requires_grad_(true);
    const at::Tensor r = at::randn({s.n, s.o, s.side, s.side, s.side});
    double ey, edx, edw;
    {
      const at::Tensor y1 = kernels::winograd_conv3d(x, w), y0 = kernels::dnnl_conv3d(x, w, 1);
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
        fmt::format("{}x{}->{}x{}^3", s.n, s.c, s.o, s.side), mdf, mwf, mwf / mdf, mds, mws,
        mws / mds, ey, edx, edw);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_winograd_conv: {}\n", e.what());
  return 1;
}
