// The segmentation loss (class-weighted CE + soft Dice) on the U-Net's logit shapes: the fused
// CPU kernel (workloads/scaffold/fused_loss.hpp, loss_kernel: fused) against LibTorch's operators
// (loss_kernel: libtorch), forward alone and forward + backward, alternating, medians of the
// repeats and their ratio (fused / LibTorch). CPU, float32. Legend: B batch, K classes, S^3 voxels.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/threads.hpp"
#include "paired_timing.hpp"
#include "workloads/scaffold/loss.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t b, k, side;
};

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"segmentation loss: fused CPU kernel against LibTorch's operators"};
  int threads = 2;
  int repeats = 15;
  int warmup = 3;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());
  // ScaFFold's outputs at scale 5 and 6 (6 classes: 5 categories + background), batch 1 and 2.
  const std::vector<Shape> shapes = {{1, 6, 32}, {2, 6, 32}, {1, 6, 64}, {2, 6, 64}, {1, 11, 64}};
  fmt::print(
      "# threads {}, float32, {} repeats after {} warm-up, median ms; ratio = fused / libtorch\n",
      at::get_num_threads(), repeats, warmup);
  bench::print_paired_header("libtorch", "fused");
  for (const Shape& s : shapes) {
    at::manual_seed(1);
    const at::Tensor x = at::randn({s.b, s.k, s.side, s.side, s.side}).requires_grad_(true);
    const at::Tensor y = at::randint(0, s.k, {s.b, s.side, s.side, s.side});
    const at::Tensor w = at::rand({s.k}) + 0.5;
    const at::Tensor r = at::ones({});
    const bench::Paired m = bench::alternate(warmup, repeats, [&](bool fused) {
      return bench::time_op([&] { return train::segmentation_loss(x, y, w, {}, fused).loss; }, {x},
                            r);
    });
    bench::print_paired_row(fmt::format("{}x{}x{}^3", s.b, s.k, s.side), m);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_loss: {}\n", e.what());
  return 1;
}
