// The GPT's causal attention: the native kernel (kernels/attention.hpp, on the QKV projection in
// place) against the plain path the model runs otherwise (views of the projection, matmul, causal
// mask, float32 softmax, matmul, the heads merged back), forward alone and forward + backward,
// alternating, medians of the repeats and their ratio (native / plain). CPU, float32 (bf16 with
// --bf16: bf16 tensors on both sides, as under the model's autocast). Shapes: GPT-2 124M at the
// issue-29 batches (B 4 x S 64, B 8 x S 128), the 800M preset's heads (8 of 256) and one long
// sequence. Legend: B batch, S sequence, a heads, d head size.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/threads.hpp"
#include "kernels/attention.hpp"
#include "paired_timing.hpp"

using namespace scaffold;

namespace {

struct Shape {
  int64_t b, s, heads, d;
};

// The model's plain path (llm::GptBlockImpl::core_attention with plain causal_attention).
at::Tensor plain(const at::Tensor& projected, int64_t heads, int64_t d) {
  const int64_t b = projected.size(0), s = projected.size(1);
  const at::Tensor qkv = projected.view({b, s, heads, 3, d}).permute({3, 0, 2, 1, 4});
  const at::Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor future = at::ones({s, s}, q.options().dtype(at::kBool)).triu(1);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  const at::Tensor probs =
      at::softmax(scores.masked_fill_(future, -INFINITY), -1, at::kFloat).to(v.scalar_type());
  return at::matmul(probs, v).transpose(1, 2).reshape({b, s, heads * d});
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"causal attention: native kernel against the plain LibTorch path (CPU)"};
  int threads = 2;
  int repeats = 9;
  int warmup = 2;
  bool bf16 = false;
  app.add_option("--threads", threads, "intra-op threads (0: core::default_thread_count())");
  app.add_option("--repeats", repeats, "timed repeats of each kernel, alternating");
  app.add_option("--warmup", warmup, "untimed repeats of each first");
  app.add_flag("--bf16", bf16, "bf16 inputs");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads > 0 ? threads : core::default_thread_count());
  const std::vector<Shape> shapes = {
      {4, 64, 12, 64}, {8, 128, 12, 64}, {2, 128, 8, 256}, {1, 1024, 12, 64}};
  fmt::print("# threads {}, {}, {} repeats after {} warm-up, median ms; ratio = native / plain\n",
             at::get_num_threads(), bf16 ? "bf16" : "float32", repeats, warmup);
  bench::print_paired_header("plain", "native");
  for (const Shape& s : shapes) {
    at::manual_seed(1);
    const at::Tensor x = at::randn({s.b, s.s, s.heads * 3 * s.d})
                             .to(bf16 ? at::kBFloat16 : at::kFloat)
                             .requires_grad_(true);
    const at::Tensor r = at::randn({s.b, s.s, s.heads * s.d}).to(x.scalar_type());
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
    const bench::Paired m = bench::alternate(warmup, repeats, [&](bool native) {
      return bench::time_op(
          [&] {
            return native ? kernels::causal_attention(x, s.heads, scale) : plain(x, s.heads, s.d);
          },
          {x}, r);
    });
    bench::print_paired_row(fmt::format("{}x{}x{}x{}", s.b, s.s, s.heads, s.d), m);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_attention: {}\n", e.what());
  return 1;
}
