// GroupNorm + ReLU on ScaFFold's layer shapes: the fused CPU kernel (kernels/fused_norm.hpp)
// against the unfused composition the U-Net runs otherwise (torch's group_norm, then an in-place
// relu), forward alone and forward + backward (input, weight and bias gradients). The two run
// alternately, each repeat timing one of each, and the table gives medians over the repeats and
// their ratio (fused / unfused). float32 NCDHW on the CPU, one process; no MPI (local statistics).
// Legend: N batch, C channels, S^3 voxels.
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
#include "kernels/fused_norm.hpp"
#include "paired_timing.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t n, c, side;
};

at::Tensor norm_relu(bool fused, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                     int64_t groups) {
  return fused ? kernels::group_norm_relu(x, groups, w, b, 1e-5)
               : at::group_norm(x, groups, w, b, 1e-5).relu_();
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"Fused GroupNorm + ReLU against torch's group_norm then relu (CPU, float32)"};
  int threads = 2;
  int repeats = 15;
  int warmup = 3;
  int64_t groups = 8;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  app.add_option("--groups", groups, "GroupNorm groups");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());

  // ScaFFold's levels at scale 5 and 6, base 64 and 16 (C = base * 2^l at side 2^(scale - l)).
  const std::vector<Shape> shapes = {{1, 64, 32}, {1, 128, 16}, {1, 256, 8},
                                     {1, 64, 16}, {1, 16, 64},  {2, 16, 64},
                                     {1, 32, 32}, {2, 64, 32},  {1, 64, 64}};
  fmt::print(
      "# threads {}, groups {}, {} repeats after {} warm-up, median ms; ratio = fused / unfused\n",
      at::get_num_threads(), groups, repeats, warmup);
  fmt::print("{:<16} {:>12} {:>10} {:>7} {:>14} {:>12} {:>7}\n", "shape", "unfused_fwd",
             "fused_fwd", "ratio", "unfused_step", "fused_step", "ratio");
  for (const Shape& s : shapes) {
    torch::manual_seed(1);
    const at::Tensor x = (at::randn({s.n, s.c, s.side, s.side, s.side}) + 0.3).requires_grad_(true);
    const at::Tensor w = (at::rand({s.c}) + 0.5).requires_grad_(true);
    const at::Tensor b = (at::randn({s.c}) * 0.1).requires_grad_(true);
    const at::Tensor r = at::randn(x.sizes());
    const bench::Paired m = bench::alternate(warmup, repeats, [&](bool fused) {
      return bench::time_op([&] { return norm_relu(fused, x, w, b, groups); }, {x, w, b}, r);
    });
    const double muf = m.b.forward_ms, mff = m.a.forward_ms, mus = m.b.step_ms, mfs = m.a.step_ms;
    fmt::print("{:<16} {:>12.2f} {:>10.2f} {:>7.2f} {:>14.2f} {:>12.2f} {:>7.2f}\n",
               fmt::format("{}x{}x{}^3", s.n, s.c, s.side), muf, mff, mff / muf, mus, mfs,
               mfs / mus);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_fused_norm: {}\n", e.what());
  return 1;
}
