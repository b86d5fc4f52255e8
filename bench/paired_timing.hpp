// Two kernels timed side by side, as the per-kernel benchmarks do: each op timed forward alone
// (no autograd) and forward + backward, the two kernels run alternately in every repeat (which
// goes first alternates too, so neither always finds the other's warm cache), medians over the
// repeats after the warm-up ones.
#pragma once

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/timer.hpp"

namespace scaffold::bench {

struct Timing {
  double forward_ms = 0, step_ms = 0;  // forward; forward + backward
};

// op() once under no-grad, then once more with the gradients of its output (seeded with r) with
// respect to `inputs`.
template <typename Op>
Timing time_op(Op&& op, const std::vector<at::Tensor>& inputs, const at::Tensor& r) {
  Timing t;
  {
    torch::NoGradGuard no_grad;
    const double t0 = core::monotonic_s();
    const at::Tensor y = op();
    t.forward_ms = 1e3 * (core::monotonic_s() - t0);
  }
  const double t0 = core::monotonic_s();
  const at::Tensor y = op();
  const auto grads = torch::autograd::grad({y}, inputs, {r});
  t.step_ms = 1e3 * (core::monotonic_s() - t0);
  return t;
}

struct Paired {
  Timing a, b;  // medians of time(true) and of time(false)
};

// time(bool a) times kernel a (true) or b (false) once.
template <typename TimeOnce>
Paired alternate(int warmup, int repeats, TimeOnce&& time) {
  std::vector<double> af, as, bf, bs;
  for (int i = 0; i < warmup + repeats; ++i) {
    const bool a_first = i % 2 == 1;
    const Timing x = time(a_first), y = time(!a_first);
    if (i < warmup) continue;
    const Timing& a = a_first ? x : y;
    const Timing& b = a_first ? y : x;
    af.push_back(a.forward_ms);
    as.push_back(a.step_ms);
    bf.push_back(b.forward_ms);
    bs.push_back(b.step_ms);
  }
  return {{core::median(af), core::median(as)}, {core::median(bf), core::median(bs)}};
}

// The table of a paired benchmark: kernel b (the reference) and a, forward and forward +
// backward, each with the ratio a / b; one row per shape.
inline void print_paired_header(const std::string& b_name, const std::string& a_name) {
  fmt::print("{:<16} {:>12} {:>10} {:>7} {:>14} {:>12} {:>7}\n", "shape", b_name + "_fwd",
             a_name + "_fwd", "ratio", b_name + "_step", a_name + "_step", "ratio");
}
inline void print_paired_row(const std::string& shape, const Paired& m) {
  fmt::print("{:<16} {:>12.2f} {:>10.2f} {:>7.2f} {:>14.2f} {:>12.2f} {:>7.2f}\n", shape,
             m.b.forward_ms, m.a.forward_ms, m.a.forward_ms / m.b.forward_ms, m.b.step_ms,
             m.a.step_ms, m.a.step_ms / m.b.step_ms);
}

}  // namespace scaffold::bench
