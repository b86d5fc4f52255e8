// One GPT training step (forward, loss, backward, clip, AdamW) timed in isolation, exactly as
// the llm_training workload runs it through its task (GptTask::train_forward, clip_gradients,
// megatron_adam), on random tokens; plus the share of the step in attention, MLP, embedding +
// logits + loss, and the optimizer, each sublayer timed forward + backward on its own at the
// step's shapes. bench/gpt_step.py is the PyTorch twin (same weights, same tokens: the
// first-step loss is compared); bench/bench_gpt_step.sh alternates the two. Under mpiexec with
// --tp N the model is split over N tensor-parallel ranks and the all-reduce time is reported.
// --gemm-peak 1 also times LibTorch's matrix product at the model's own GEMM shapes in the step's
// dtype, in this process and with its threads, and reports the step's model FLOP/s as a fraction
// of the fastest (MFU against the measured GEMM peak, not a datasheet's). In float32 it also times
// the CPU's multiply-add peak (kernels::simd::fma_peak_gflops) and reports the time the step's
// dense products (linear layers and logits, forward and backward) need at that peak: no float32
// step of this model, ours or PyTorch's, can take less on this machine.
// Legend: B batch, S sequence, h hidden, V padded vocabulary.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/stats.hpp"
#include "core/sysinfo.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "core/version.hpp"
#include "dist/communicator.hpp"
#include "dist/tensor_comm.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/simd.hpp"
#include "nn/autocast.hpp"
#include "train/grad_clip.hpp"
#include "workloads/llm_training/gpt.hpp"
#include "workloads/llm_training/metrics.hpp"
#include "workloads/llm_training/task.hpp"
#include "workloads/llm_training/tensor_parallel.hpp"

using namespace scaffold;

namespace {

struct BenchOptions {
  int64_t layers = 4, hidden = 256, heads = 8, ffn = 0, seq = 256, vocab = 50304, batch = 4;
  int warmup_steps = 2, timed_steps = 5, threads = 0, tp = 1;
  std::string precision = "fp32";  // fp32 | bf16
  std::string attention = "auto";  // the workload's key: native on a CPU where it can run
  std::string positions = "learned";
  std::string recompute = "none";
  bool breakdown = true;
  bool gemm_peak = true;
  std::string optimizer_kernel = "fused";  // fused | libtorch (the workload's optimizer_kernel)
  std::string gemm_kernel = "probe";       // probe | onednn | libtorch (the workload's gemm_kernel)
  std::string gelu_kernel = "native";      // native | libtorch (the workload's gelu_kernel)
  std::string loss_kernel = "native";      // native | libtorch (the workload's loss_kernel)
  std::string trace;  // non-empty: LibTorch's per-op trace of one more step, Chrome JSON
  uint64_t seed = 0;
};

nn::AutocastState autocast_for(const std::string& precision) {
  nn::AutocastState s = nn::AutocastState::current().disabled();
  s.cpu_enabled = precision == "bf16";
  s.cpu_dtype = at::kBFloat16;
  return s;
}

// GFLOP/s of at::mm at the GPT's GEMM shapes (m = B S tokens): QKV (h -> 3h), the MLP's two
// (h -> 4h, 4h -> h) and the logits (h -> V), in `dtype`; the fastest of the four, each the
// median of 5 runs after 2. With `onednn` (linear layers that may run oneDNN's sgemm and our own,
// or in bf16 oneDNN's matmul: kernels::bf16_linear_on_onednn) those products are timed at each
// shape too, and the fastest counts.
double gemm_peak_gflops(int64_t m, int64_t h, int64_t v, at::ScalarType dtype, bool onednn) {
  double best = 0;
  for (const auto& [k, n] :
       std::vector<std::pair<int64_t, int64_t>>{{h, 3 * h}, {h, 4 * h}, {4 * h, h}, {h, v}}) {
    const at::Tensor a = at::randn({m, k}).to(dtype), b = at::randn({k, n}).to(dtype);
    // GFLOP/s of product(): the median of 5 runs after 2. (The FLOPs outside the lambda: C++17
    // lambdas do not capture structured bindings.)
    const double flop = 2.0 * static_cast<double>(m * k * n);
    const auto gflops = [&](const auto& product) {
      std::vector<double> t;
      for (int i = 0; i < 7; ++i) {
        core::Stopwatch clock;
        at::Tensor c = product();
        if (i >= 2) t.push_back(clock.elapsed_s());
      }
      return flop / core::median(t) / 1e9;
    };
    best = std::max(best, gflops([&] { return at::mm(a, b); }));
    const at::Tensor bt = b.t().contiguous();  // (n, k): a linear layer's weight
    const bool bf16_matmul =
        dtype == at::kBFloat16 &&
        kernels::bf16_linear_on_onednn(c10::Device(c10::kCPU), kernels::GemmKernel::OneDnn);
    if (!onednn || (!bf16_matmul && !kernels::dnnl_linear_supported(a, bt))) continue;
    const nn::AutocastGuard autocast(autocast_for(bf16_matmul ? "bf16" : "fp32"));
    // oneDNN's product, and in float32 our own sgemm too (the probe may choose either).
    std::vector<std::function<at::Tensor()>> products;
    if (bf16_matmul)
      products.push_back([&] { return kernels::linear(a, bt, {}, kernels::GemmKernel::OneDnn); });
    else
      products = {[&] { return kernels::dnnl_linear(a, bt, {}); },
                  [&] {
                    return kernels::chosen_linear(
                        a, bt, {}, kernels::GemmChoice::all(kernels::GemmChoice::Native));
                  }};
    for (const auto& product : products) best = std::max(best, gflops(product));
  }
  return best;
}

// The single-example source the task reads its batch from: the step's tokens as one batch.
data::Batch batch_of(const at::Tensor& tokens) {
  data::Batch b;
  b.fields = {tokens};
  for (int64_t i = 0; i < tokens.size(0); ++i) b.ids.push_back(std::to_string(i));
  return b;
}

class NoData : public data::ExampleSource {
 public:
  std::size_t size() const override { return 1; }
  data::Example get(std::size_t, uint64_t) const override { return {}; }
};

// Median seconds of fn() over `reps` runs after one untimed run; grads are cleared after each.
template <typename Fn>
double median_s(int reps, torch::nn::Module& m, Fn&& fn) {
  const auto clear = [&] {
    for (auto& p : m.parameters()) p.mutable_grad() = at::Tensor();
  };
  fn();
  clear();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    core::Stopwatch clock;
    fn();
    t.push_back(clock.elapsed_s());
    clear();
  }
  return core::median(t);
}

int run(const BenchOptions& o, dist::Communicator& world) {
  const int threads = o.threads > 0 ? o.threads : core::default_thread_count();
  at::set_num_threads(threads);
  auto tp = std::make_shared<llm::TensorParallel>();
  tp->size = o.tp;
  tp->rank = world.rank() % o.tp;
  std::unique_ptr<dist::Communicator> tp_comm;
  if (o.tp > 1) {
    tp_comm = world.split(world.rank() / o.tp, world.rank() % o.tp);
    tp->group = dist::make_tensor_comm(*tp_comm, c10::Device(c10::kCPU));
  }
  llm::GptOptions mo;
  mo.num_layers = o.layers;
  mo.hidden_size = o.hidden;
  mo.num_attention_heads = o.heads;
  mo.ffn_hidden_size = o.ffn > 0 ? o.ffn : 4 * o.hidden;
  mo.seq_length = o.seq;
  mo.padded_vocab_size = o.vocab;
  mo.position_embedding = llm::parse_position_embedding(o.positions);
  mo.attention = llm::parse_attention(
      o.attention,
      llm::native_attention_unsupported(c10::Device(c10::kCPU), 0.0, o.hidden / o.heads));
  mo.recompute = llm::parse_recompute(o.recompute);
  mo.gemm = llm::gemm_kernel(o.gemm_kernel, c10::Device(c10::kCPU));
  mo.native_gelu = llm::native_gelu(o.gelu_kernel, c10::Device(c10::kCPU));
  mo.native_loss = llm::native_loss(o.loss_kernel, c10::Device(c10::kCPU));
  // Model, then tokens, from one seed: gpt_step.py draws them in the same order.
  torch::manual_seed(o.seed);
  llm::Gpt gpt(mo, tp);
  const at::Tensor tokens = at::randint(o.vocab, {o.batch, o.seq + 1}, at::kLong);  // (B, S + 1)
  // Checksums of the initial weights and tokens, which gpt_step.py prints too.
  double weights_sum = 0;
  for (const auto& p : gpt->parameters()) weights_sum += p.abs().sum().item<double>();
  const auto tokens_sum = tokens.sum().item<int64_t>();
  const NoData none;
  llm::GptTaskOptions to;
  to.precision = o.precision;
  llm::GptTask task(gpt, none, none, c10::Device(c10::kCPU), to);
  llm::AdamOptions adam;
  adam.fused = o.optimizer_kernel == "fused";
  auto optimizer = llm::megatron_adam(adam)(gpt->parameters());
  const data::Batch batch = batch_of(tokens);

  struct Phases {
    double forward_s = 0, backward_s = 0, optimizer_s = 0;
  };
  std::vector<Phases> phases;
  std::vector<double> step_s, comm_s;
  double loss0 = std::nan("");  // of the very first step, before any update
  const auto step = [&] {
    Phases ph;
    const double comm_before = llm::tensor_parallel_stats().seconds;
    core::Stopwatch clock;
    const train::TrainForward out = task.train_forward(batch);
    ph.forward_s = clock.elapsed_s();
    train::clear_gradients(*optimizer);
    out.loss.backward();
    ph.backward_s = clock.elapsed_s() - ph.forward_s;
    task.clip_gradients(1.0, optimizer.get());
    optimizer->step();
    task.after_step();
    const double loss = out.loss.item<double>();
    ph.optimizer_s = clock.elapsed_s() - ph.forward_s - ph.backward_s;
    if (std::isnan(loss0)) loss0 = loss;
    phases.push_back(ph);
    step_s.push_back(clock.elapsed_s());
    comm_s.push_back(llm::tensor_parallel_stats().seconds - comm_before);
  };
  for (int i = 0; i < o.warmup_steps; ++i) step();
  phases.clear();
  step_s.clear();
  comm_s.clear();
  for (int i = 0; i < o.timed_steps; ++i) step();
  if (!o.trace.empty()) {  // after the timed steps, so the profiler costs them nothing
    {
      torch::autograd::profiler::RecordProfile record(o.trace);
      step();
    }
    phases.pop_back();
    step_s.pop_back();
    comm_s.pop_back();
    fmt::print("  trace of one more step (LibTorch's profiler, Chrome JSON): {}\n", o.trace);
  }
  const auto median_of = [](const std::vector<double>& v) { return core::median(v); };
  std::vector<double> fwd, bwd, opt;
  for (const Phases& p : phases) {
    fwd.push_back(p.forward_s);
    bwd.push_back(p.backward_s);
    opt.push_back(p.optimizer_s);
  }
  const core::Spread spread = core::spread(step_s);
  const double step_ms = spread.median * 1e3;
  const double tokens_per_s = static_cast<double>(o.batch * o.seq) / spread.median;
  llm::GptFlopsModel flops{o.batch, o.seq, o.layers, o.hidden, o.vocab, 3};
  const double tflop = llm::gpt_iteration_flops(flops) / 1e12;

  // Breakdown: each part forward + backward alone, at the step's shapes and precision.
  double attention_ms = 0, mlp_ms = 0, embed_loss_ms = 0;
  if (o.breakdown) {
    const nn::AutocastState amp = autocast_for(o.precision);
    const at::Tensor x = at::randn({o.batch, o.seq, o.hidden}).requires_grad_(true);
    auto block = std::dynamic_pointer_cast<llm::GptBlockImpl>((*gpt->layers)[0]);
    const auto sub = [&](const std::function<at::Tensor(const at::Tensor&)>& f) {
      return median_s(3, *gpt, [&] {
        at::Tensor y;
        {
          nn::AutocastGuard guard(amp);
          y = f(x);
        }
        y.to(at::kFloat).sum().backward();
        x.mutable_grad() = at::Tensor();
      });
    };
    attention_ms = 1e3 * o.layers * sub([&](const at::Tensor& in) { return block->attention(in); });
    mlp_ms = 1e3 * o.layers * sub([&](const at::Tensor& in) { return block->mlp(in); });
    const at::Tensor inputs = tokens.narrow(1, 0, o.seq), labels = tokens.narrow(1, 1, o.seq);
    embed_loss_ms = 1e3 * median_s(3, *gpt, [&] {
                      at::Tensor losses;
                      {
                        nn::AutocastGuard guard(amp);
                        const at::Tensor e =
                            llm::vocab_parallel_embedding(inputs, gpt->word_embeddings, tp);
                        losses = gpt->losses_from_hidden(e + x, labels);  // the step's kernels
                      }
                      losses.mean().backward();
                      x.mutable_grad() = at::Tensor();
                    });
  }
  const double optimizer_ms = median_of(opt) * 1e3;
  // A bf16 step whose products are float32 ones (kernels::bf16_linear) against float32's peak.
  const bool bf16_products =
      o.precision == "bf16" && !kernels::bf16_linear_in_float32(c10::Device(c10::kCPU), mo.gemm);
  const double gemm_gflops = o.gemm_peak
                                 ? gemm_peak_gflops(o.batch * o.seq, o.hidden, o.vocab / o.tp,
                                                    bf16_products ? at::kBFloat16 : at::kFloat,
                                                    mo.gemm != kernels::GemmKernel::LibTorch)
                                 : std::nan("");
  const double step_gflops = tflop * 1e3 / spread.median / o.tp;
  // The products every implementation of this step computes: per token, 2 FLOPs per weight of
  // the linear layers (4 h^2 + 2 h ffn a layer) and of the logits (h V), forward, and twice that
  // backward (input and weight gradients); the attention's products, which a causal kernel may
  // halve, are left out, so this is a floor.
  const double dense_gflop =
      6.0 * static_cast<double>(o.batch * o.seq) *
      static_cast<double>(o.layers * (4 * o.hidden * o.hidden + 2 * o.hidden * mo.ffn_hidden_size) +
                          o.hidden * o.vocab) /
      o.tp / 1e9;
  const double fma_gflops =
      o.gemm_peak && o.precision == "fp32" ? kernels::simd::fma_peak_gflops(threads) : std::nan("");
  const double rest_ms = step_ms - attention_ms - mlp_ms - embed_loss_ms - optimizer_ms;
  const double comm_ms = median_of(comm_s) * 1e3;
  if (world.rank() == 0) {
    fmt::print(
        "bench_gpt_step (C++ LibTorch {}, scaffold {} {}): {} layers, hidden {}, {} heads, FFN {}, "
        "sequence "
        "{}, vocabulary {}, batch {}, {}, {} attention, {} positions, recompute {}, {} threads, TP "
        "{}, {} "
        "parameters\n",
        core::torch_version_built_with(), core::version(), core::git_commit(), o.layers, o.hidden,
        o.heads, mo.ffn_hidden_size, o.seq, o.vocab, o.batch, o.precision,
        llm::to_string(mo.attention), o.positions, o.recompute, threads, o.tp,
        llm::gpt_parameter_count(mo));
    fmt::print(
        "  step: median {:.1f} ms (min {:.1f}, max {:.1f}) of {} after {}; {:.1f} tokens/s; {:.4f} "
        "TFLOP "
        "-> {:.1f} GFLOP/s per rank\n",
        step_ms, spread.min * 1e3, spread.max * 1e3, o.timed_steps, o.warmup_steps, tokens_per_s,
        tflop, step_gflops);
    if (o.gemm_peak)
      fmt::print("  GEMM peak here ({}, {} at the model's shapes): {:.1f} GFLOP/s; MFU {:.3f}\n",
                 bf16_products ? "bf16" : "fp32",
                 mo.gemm == kernels::GemmKernel::LibTorch ? "at::mm"
                 : bf16_products                          ? "at::mm and oneDNN's matmul"
                                                          : "at::mm, oneDNN's sgemm and ours",
                 gemm_gflops, step_gflops / gemm_gflops);
    if (!std::isnan(fma_gflops))
      fmt::print(
          "  float32 multiply-add peak here ({} threads, registers only): {:.1f} GFLOP/s; the "
          "step's dense products ({:.1f} GFLOP) need >= {:.1f} ms at it ({:.2f} of this step)\n",
          threads, fma_gflops, dense_gflop, 1e3 * dense_gflop / fma_gflops,
          1e3 * dense_gflop / fma_gflops / step_ms);
    fmt::print(
        "  phases: forward + loss {:.1f} ms, backward {:.1f} ms, clip + AdamW {:.1f} ms; "
        "tensor-parallel "
        "all-reduce {:.1f} ms ({:.1f}% of the step)\n",
        median_of(fwd) * 1e3, median_of(bwd) * 1e3, optimizer_ms, comm_ms, 100 * comm_ms / step_ms);
    if (o.breakdown)
      fmt::print(
          "  shares (parts timed alone, forward + backward): attention {:.1f}%, MLP {:.1f}%, "
          "embedding + "
          "logits + loss {:.1f}%, optimizer {:.1f}%, the rest (LayerNorms, residuals, copies) "
          "{:.1f}%\n",
          100 * attention_ms / step_ms, 100 * mlp_ms / step_ms, 100 * embed_loss_ms / step_ms,
          100 * optimizer_ms / step_ms, 100 * rest_ms / step_ms);
    fmt::print("  first-step loss {:.6f}; checksums: |weights| {:.6f}, tokens {}\n", loss0,
               weights_sum, tokens_sum);
    fmt::print(
        "result impl=cpp layers={} hidden={} heads={} seq={} vocab={} batch={} dtype={} threads={} "
        "tp={} "
        "params={} step_ms={:.2f} step_ms_min={:.2f} tokens_per_s={:.1f} loss0={:.6f} "
        "forward_ms={:.2f} "
        "backward_ms={:.2f} optimizer_ms={:.2f} comm_ms={:.2f} attention_ms={:.2f} mlp_ms={:.2f} "
        "embed_loss_ms={:.2f} weights_sum={:.4f} tokens_sum={} optimizer_kernel={} "
        "gemm_kernel={} gelu_kernel={} loss_kernel={} attention={} step_gflops={:.2f} "
        "gemm_gflops={:.2f} "
        "mfu={:.4f} dense_gflop={:.3f} fma_gflops={:.2f} "
        "peak_rss_mib={}\n",
        o.layers, o.hidden, o.heads, o.seq, o.vocab, o.batch, o.precision, threads, o.tp,
        llm::gpt_parameter_count(mo), step_ms, spread.min * 1e3, tokens_per_s, loss0,
        median_of(fwd) * 1e3, median_of(bwd) * 1e3, optimizer_ms, comm_ms, attention_ms, mlp_ms,
        embed_loss_ms, weights_sum, tokens_sum, o.optimizer_kernel, o.gemm_kernel, o.gelu_kernel,
        o.loss_kernel,
        mo.attention == llm::AttentionImpl::kNative  ? "native"
        : mo.attention == llm::AttentionImpl::kFused ? "fused"
                                                     : "plain",
        step_gflops, gemm_gflops, step_gflops / gemm_gflops, dense_gflop, fma_gflops,
        core::peak_rss_bytes() / (1 << 20));
    for (const std::string& line : kernels::probe_verdicts().lines())
      fmt::print("  probe: {}\n", line);
  }
  return 0;
}

int parse_and_run(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{"Time one GPT training step (forward, loss, backward, clip, AdamW) and its parts"};
  app.add_option("--layers", o.layers)->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden)->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads)->check(CLI::PositiveNumber);
  app.add_option("--ffn", o.ffn, "0: 4 x hidden")->check(CLI::NonNegativeNumber);
  app.add_option("--seq", o.seq)->check(CLI::PositiveNumber);
  app.add_option("--vocab", o.vocab, "padded vocabulary")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch)->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup_steps)->check(CLI::NonNegativeNumber);
  app.add_option("--steps", o.timed_steps)->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "0: OMP_NUM_THREADS or all CPUs")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tp", o.tp, "tensor-parallel ranks (run under mpiexec -n TP)")
      ->check(CLI::PositiveNumber);
  app.add_option("--precision", o.precision)->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--attention", o.attention)
      ->check(CLI::IsMember({"plain", "fused", "native", "auto"}));
  app.add_option("--positions", o.positions)->check(CLI::IsMember({"learned", "rope"}));
  app.add_option("--recompute", o.recompute)->check(CLI::IsMember({"none", "selective", "full"}));
  app.add_option("--breakdown", o.breakdown,
                 "time attention, MLP and embedding + loss alone (0/1)");
  app.add_option("--seed", o.seed);
  app.add_option("--gemm-peak", o.gemm_peak,
                 "time at::mm at the model's GEMM shapes and report MFU against it (0/1)");
  app.add_option("--optimizer-kernel", o.optimizer_kernel,
                 "AdamW: fused (one pass, the workload's default) or libtorch")
      ->check(CLI::IsMember({"fused", "libtorch"}));
  app.add_option("--gemm-kernel", o.gemm_kernel,
                 "the linear layers' products: probe (the workload's default on a CPU), onednn "
                 "or libtorch")
      ->check(CLI::IsMember({"probe", "onednn", "libtorch"}));
  app.add_option("--gelu-kernel", o.gelu_kernel,
                 "the MLP's tanh GELU: native (the workload's default on a CPU) or libtorch")
      ->check(CLI::IsMember({"native", "libtorch"}));
  app.add_option("--loss-kernel", o.loss_kernel,
                 "the output layer's cross-entropy: native (the workload's default on a CPU) or "
                 "libtorch")
      ->check(CLI::IsMember({"native", "libtorch"}));
  app.add_option("--trace", o.trace,
                 "write LibTorch's per-operator trace of one step after the timed ones to this "
                 "Chrome JSON file");
  CLI11_PARSE(app, argc, argv);
  dist::Runtime runtime(&argc, &argv);
  if (runtime.world().size() != o.tp) {
    fmt::print(stderr, "error: --tp {} needs exactly {} ranks (mpiexec -n {}), got {}\n", o.tp,
               o.tp, o.tp, runtime.world().size());
    return 2;
  }
  return run(o, runtime.world());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
