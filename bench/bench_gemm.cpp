// A linear layer's three float32 products (y = x w^T; dx = dy w; dw = dy^T x) on our own sgemm
// (kernels/sgemm.hpp) against LibTorch's at::mm (OpenBLAS on Debian), alternating, at the GPT
// presets' shapes: `tokens` rows (B x S) against each layer's weight. Per shape: the median ms of
// the three products on each side, their GFLOP/s, the ratio ours / LibTorch, the largest
// difference from at::mm relative to the output's largest magnitude, and the process's
// multiply-add peak (kernels/simd.hpp) for scale.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "kernels/sgemm.hpp"
#include "kernels/simd.hpp"

using namespace scaffold;

namespace {

struct Shape {
  std::string name;
  int64_t tokens, out, in;  // x tokens x in, w out x in
};

// Product p (0: y = x w^T, 1: dx = dy w, 2: dw = dy^T x) on our sgemm, into a preallocated output.
void ours(int p, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy, at::Tensor& out) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>(), *dyp = dy.data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (p == 0)
    kernels::sgemm(false, true, m, n, k, xp, k, wp, k, o, n, false);
  else if (p == 1)
    kernels::sgemm(false, false, m, k, n, dyp, n, wp, k, o, k, false);
  else
    kernels::sgemm(true, false, n, k, m, dyp, n, xp, k, o, k, false);
}

void libtorch(int p, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
              at::Tensor& out) {
  if (p == 0)
    at::mm_out(out, x, w.t());
  else if (p == 1)
    at::mm_out(out, dy, w);
  else
    at::mm_out(out, dy.t(), x);
}

double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"a linear layer's float32 products: our sgemm against LibTorch's at::mm (CPU)"};
  int threads = 2;
  int repeats = 5;
  int warmup = 1;
  std::vector<int64_t> token_counts = {256, 1024};
  bool large = false;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each side, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each side first");
  app.add_option("--tokens", token_counts, "rows of x (B x S), each a set of shapes");
  app.add_flag("--large", large, "the 800M preset's layers (hidden 2048) too");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());
  at::manual_seed(0);
  const double peak = kernels::simd::fma_peak_gflops();
  fmt::print(
      "# threads {}, multiply-add peak {:.0f} GFLOP/s, {} repeats after {} warm-up, "
      "median ms of the 3 products, GFLOP/s; ratio = ours / libtorch, all and by product\n",
      at::get_num_threads(), peak, repeats, warmup);
  fmt::print("{:<12} {:>5} {:>5} {:>5} {:>8} {:>8} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>8}\n",
             "layer", "m", "out", "in", "ours ms", "torch ms", "ours", "torch", "ratio", "y", "dx",
             "dw", "rel diff");
  std::vector<Shape> shapes;
  for (const int64_t t : token_counts) {
    shapes.insert(shapes.end(), {{"124M qkv", t, 2304, 768},
                                 {"124M proj", t, 768, 768},
                                 {"124M fc", t, 3072, 768},
                                 {"124M fc2", t, 768, 3072},
                                 {"124M logits", t, 50304, 768}});
    if (large)
      shapes.insert(shapes.end(), {{"800M qkv", t, 6144, 2048},
                                   {"800M proj", t, 2048, 2048},
                                   {"800M fc", t, 8192, 2048},
                                   {"800M fc2", t, 2048, 8192},
                                   {"800M logits", t, 50304, 2048}});
  }
  for (const Shape& s : shapes) {
    const at::Tensor x = at::randn({s.tokens, s.in});
    const at::Tensor w = at::randn({s.out, s.in}) * 0.02;
    const at::Tensor dy = at::randn({s.tokens, s.out});
    const std::vector<at::Tensor> outputs = {at::empty({s.tokens, s.out}),
                                             at::empty({s.tokens, s.in}), at::empty({s.out, s.in})};
    double ours_total = 0, torch_total = 0, diff = 0;
    std::vector<double> ratios;
    for (int p = 0; p < 3; ++p) {
      at::Tensor mine = at::empty_like(outputs[p]), reference = at::empty_like(outputs[p]);
      std::vector<double> ours_ms, torch_ms;
      for (int i = 0; i < warmup + repeats; ++i) {
        const bool ours_first = i % 2 == 0;
        double t_ours = 0, t_torch = 0;
        for (int side = 0; side < 2; ++side) {
          const bool run_ours = (side == 0) == ours_first;
          const core::Stopwatch watch;
          if (run_ours)
            ours(p, x, w, dy, mine);
          else
            libtorch(p, x, w, dy, reference);
          (run_ours ? t_ours : t_torch) = 1e3 * watch.elapsed_s();
        }
        if (i < warmup) continue;
        ours_ms.push_back(t_ours);
        torch_ms.push_back(t_torch);
      }
      diff = std::max(diff, relative_difference(mine, reference));
      ours_total += core::median(ours_ms);
      torch_total += core::median(torch_ms);
      ratios.push_back(core::median(ours_ms) / core::median(torch_ms));
    }
    const double gflop = 6.0 * static_cast<double>(s.tokens * s.out * s.in) * 1e-9;
    fmt::print(
        "{:<12} {:>5} {:>5} {:>5} {:>8.2f} {:>8.2f} {:>5.0f} {:>5.0f} {:>6.3f} {:>5.2f} {:>5.2f} "
        "{:>5.2f} {:>8.1e}\n",
        s.name, s.tokens, s.out, s.in, ours_total, torch_total, gflop / ours_total * 1e3,
        gflop / torch_total * 1e3, ours_total / torch_total, ratios[0], ratios[1], ratios[2], diff);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_gemm: {}\n", e.what());
  return 1;
}
