// MaxPool3d(2) on the U-Net's pooled shapes: the k2 s2 kernel (kernels/max_pool.hpp) against
// LibTorch's max_pool3d, forward alone and forward + backward, alternating, medians of the
// repeats and their ratio (native / LibTorch). CPU, contiguous NCDHW, float32 (bf16 with --bf16:
// LibTorch 1.13 has no bf16 CPU max pool, so its side pools the float32 copy, as the U-Net does).
// Legend: N batch, C channels, S^3 voxels of the input.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/threads.hpp"
#include "kernels/max_pool.hpp"
#include "paired_timing.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t n, c, side;
};

at::Tensor pool(bool native, const at::Tensor& x) {
  if (native) return kernels::max_pool3d_k2s2(x);
  const at::Tensor xf = x.scalar_type() == at::kFloat ? x : x.to(at::kFloat);
  return at::max_pool3d(xf, {2, 2, 2}, {2, 2, 2}).to(x.scalar_type());
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"k2 s2 max pool against LibTorch's max_pool3d (CPU)"};
  int threads = 2;
  int repeats = 15;
  int warmup = 3;
  bool bf16 = false;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  app.add_flag("--bf16", bf16, "bf16 inputs");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());
  // ScaFFold's pooled levels at scale 5 and 6, base 16 and 64, batch 1 and 2.
  const std::vector<Shape> shapes = {{1, 16, 64}, {2, 16, 64}, {1, 32, 32},  {1, 64, 32},
                                     {2, 64, 32}, {1, 64, 16}, {1, 128, 16}, {1, 16, 32}};
  fmt::print(
      "# threads {}, {}, {} repeats after {} warm-up, median ms; ratio = native / libtorch\n",
      at::get_num_threads(), bf16 ? "bf16" : "float32", repeats, warmup);
  bench::print_paired_header("libtorch", "native");
  for (const Shape& s : shapes) {
    at::manual_seed(1);
    const at::Tensor x = at::randn({s.n, s.c, s.side, s.side, s.side})
                             .to(bf16 ? at::kBFloat16 : at::kFloat)
                             .requires_grad_(true);
    const int64_t h = s.side / 2;
    const at::Tensor r = at::randn({s.n, s.c, h, h, h}).to(x.scalar_type());
    const bench::Paired m = bench::alternate(warmup, repeats, [&](bool native) {
      return bench::time_op([&] { return pool(native, x); }, {x}, r);
    });
    bench::print_paired_row(fmt::format("{}x{}x{}^3", s.n, s.c, s.side), m);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_max_pool: {}\n", e.what());
  return 1;
}
