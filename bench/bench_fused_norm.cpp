// GroupNorm + ReLU on ScaFFold's layer shapes: the fused CPU kernel (model/fused_norm.hpp)
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

#include "core/stats.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "model/fused_norm.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t n, c, side;
};

struct Timing {
  double forward_ms, step_ms;  // forward; forward + backward
};

Timing time_once(bool fused, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                 const at::Tensor& r, int64_t groups) {
  auto op = [&] {
    return fused ? model::group_norm_relu(x, groups, w, b, 1e-5)
                 : at::group_norm(x, groups, w, b, 1e-5).relu_();
  };
  Timing t{};
  {
    torch::NoGradGuard no_grad;
    const double t0 = core::monotonic_s();
    const at::Tensor y = op();
    t.forward_ms = 1e3 * (core::monotonic_s() - t0);
  }
  const double t0 = core::monotonic_s();
  const at::Tensor y = op();
  const auto grads = torch::autograd::grad({y}, {x, w, b}, {r});
  t.step_ms = 1e3 * (core::monotonic_s() - t0);
  return t;
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
    std::vector<double> uf, ff, us, fs;
    for (int i = 0; i < warmup + repeats; ++i) {
      // Alternate which goes first, so neither always runs on the other's warm cache.
      const bool fused_first = i % 2 == 1;
      const Timing a = time_once(fused_first, x, w, b, r, groups);
      const Timing c = time_once(!fused_first, x, w, b, r, groups);
      if (i < warmup) continue;
      const Timing& fused = fused_first ? a : c;
      const Timing& unfused = fused_first ? c : a;
      uf.push_back(unfused.forward_ms);
      ff.push_back(fused.forward_ms);
      us.push_back(unfused.step_ms);
      fs.push_back(fused.step_ms);
    }
    const double muf = core::median(uf), mff = core::median(ff), mus = core::median(us),
                 mfs = core::median(fs);
    fmt::print("{:<16} {:>12.2f} {:>10.2f} {:>7.2f} {:>14.2f} {:>12.2f} {:>7.2f}\n",
               fmt::format("{}x{}x{}^3", s.n, s.c, s.side), muf, mff, mff / muf, mus, mfs,
               mfs / mus);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_fused_norm: {}\n", e.what());
  return 1;
}
