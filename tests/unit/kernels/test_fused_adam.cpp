// FusedAdam against torch::optim::Adam and FusedAdamW against torch::optim::AdamW, the references:
// the same parameters and gradients through several steps (a learning-rate change between them,
// with and without weight decay, contiguous and channels-last parameters) give parameters and
// moments within float32 rounding (1e-6 of the largest magnitude), and their saved states load
// into each other. adamw_update (ShardedAdamW's slices) against AdamW the same way. sum_of_squares
// against a float64 sum, the same to the bit on 1 and 2 threads.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/fused_adam.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::train {
namespace {

using model::test::tensors_close;

std::vector<at::Tensor> make_params(bool channels_last, at::ScalarType dtype = at::kFloat) {
  at::manual_seed(3);
  at::Tensor conv = at::randn({16, 8, 3, 3, 3}, dtype);
  if (channels_last) conv = conv.contiguous(at::MemoryFormat::ChannelsLast3d);
  // 40000 elements: more than one parallel chunk.
  return {conv.requires_grad_(true), at::randn({40000}, dtype).requires_grad_(true),
          at::randn({8}, dtype).requires_grad_(true)};
}

template <typename State = torch::optim::AdamParamState>
const State& state_of(const torch::optim::Optimizer& opt, const at::Tensor& p) {
  return static_cast<const State&>(*opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
}

void set_grads(const std::vector<at::Tensor>& params, int step) {
  at::manual_seed(100 + step);
  torch::NoGradGuard no_grad;
  for (const at::Tensor& p : params) p.mutable_grad() = at::randn_like(p) * (1.0 + step);
}

void run_steps(torch::optim::Optimizer& opt, const std::vector<at::Tensor>& params) {
  for (int step = 0; step < 5; ++step) {
    if (step == 3)
      for (auto& group : opt.param_groups()) group.options().set_lr(3e-3);
    set_grads(params, step);
    opt.step();
  }
}

// Adam's and AdamW's states (the same fields under two types).
template <typename State>
void expect_same_state(const State& s, const State& t) {
  EXPECT_EQ(s.step(), t.step());
  EXPECT_TRUE(tensors_close(s.exp_avg(), t.exp_avg(), 1e-6, "exp_avg"));
  EXPECT_TRUE(tensors_close(s.exp_avg_sq(), t.exp_avg_sq(), 1e-6, "exp_avg_sq"));
}
void expect_same_state(const torch::optim::SGDParamState& s, const torch::optim::SGDParamState& t) {
  const at::Tensor &a = s.momentum_buffer(), &b = t.momentum_buffer();
  EXPECT_TRUE(tensors_close(a, b, 1e-6, "momentum_buffer"));
  // Laid out alike: equal strides wherever a dimension has more than one element (LibTorch's
  // buffer follows the gradient's strides, ours the parameter's; size-1 strides may differ).
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1) EXPECT_EQ(a.stride(d), b.stride(d)) << "dimension " << d;
}

template <typename State = torch::optim::AdamParamState>
void expect_same(const torch::optim::Optimizer& ours, const std::vector<at::Tensor>& p,
                 const torch::optim::Optimizer& ref, const std::vector<at::Tensor>& r) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    EXPECT_TRUE(tensors_close(p[i], r[i], 1e-6, "parameter"));
    EXPECT_EQ(p[i].strides(), r[i].strides());
    EXPECT_EQ(ours.state().count(c10::guts::to_string(p[i].unsafeGetTensorImpl())),
              ref.state().count(c10::guts::to_string(r[i].unsafeGetTensorImpl())));
    if (ref.state().count(c10::guts::to_string(r[i].unsafeGetTensorImpl())) == 0) continue;
    expect_same_state(state_of<State>(ours, p[i]), state_of<State>(ref, r[i]));
  }
}

TEST(FusedAdam, MatchesLibTorchsAdamOverSteps) {
  for (const bool channels_last : {false, true}) {
    for (const double weight_decay : {0.0, 0.01}) {
      SCOPED_TRACE(std::string(channels_last ? "channels-last" : "contiguous") + ", weight decay " +
                   std::to_string(weight_decay));
      const auto p = make_params(channels_last), r = make_params(channels_last);
      const auto options = torch::optim::AdamOptions(1e-2).weight_decay(weight_decay);
      kernels::FusedAdam ours(p, options);
      torch::optim::Adam ref(r, options);
      run_steps(ours, p);
      run_steps(ref, r);
      EXPECT_TRUE(ours.last_step_fused());
      expect_same(ours, p, ref, r);
      // Moving the parameters at all: they are not where they started.
      EXPECT_FALSE(tensors_close(p[1], make_params(channels_last)[1], 1e-3, "moved"));
    }
  }
}

TEST(FusedAdam, FallsBackToLibTorchsStepForWhatItDoesNotFuse) {
  {
    const auto p = make_params(false, at::kDouble), r = make_params(false, at::kDouble);
    kernels::FusedAdam ours(p, torch::optim::AdamOptions(1e-2));
    torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2));
    run_steps(ours, p);
    run_steps(ref, r);
    EXPECT_FALSE(ours.last_step_fused());
    expect_same(ours, p, ref, r);
  }
  {
    const auto p = make_params(false), r = make_params(false);
    kernels::FusedAdam ours(p, torch::optim::AdamOptions(1e-2).amsgrad(true));
    torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2).amsgrad(true));
    run_steps(ours, p);
    run_steps(ref, r);
    EXPECT_FALSE(ours.last_step_fused());
    expect_same(ours, p, ref, r);
  }
}

// A checkpoint written by `ours` (after its steps over p) loads into `ref` (over r, given p's
// values), and the runs go on alike.
template <typename State>
void expect_interchangeable(torch::optim::Optimizer& ours, const std::vector<at::Tensor>& p,
                            torch::optim::Optimizer& ref, const std::vector<at::Tensor>& r) {
  run_steps(ours, p);
  torch::serialize::OutputArchive out;
  ours.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < p.size(); ++i) r[i].copy_(p[i]);
  }
  torch::serialize::InputArchive in;
  std::istringstream read(bytes.str());
  in.load_from(read);
  ref.load(in);
  expect_same<State>(ours, p, ref, r);
  // The learning rate is the training loop's to set after a resume (it is set every epoch).
  for (torch::optim::Optimizer* opt : {&ours, &ref})
    for (auto& group : opt->param_groups()) group.options().set_lr(1e-2);
  run_steps(ours, p);
  run_steps(ref, r);
  expect_same<State>(ours, p, ref, r);
}

TEST(FusedAdam, StateIsInterchangeableWithLibTorchsAdam) {
  const auto p = make_params(false), r = make_params(false);
  kernels::FusedAdam ours(p, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2));
  expect_interchangeable<torch::optim::AdamParamState>(ours, p, ref, r);
}

using AdamWState = torch::optim::AdamWParamState;

// Megatron's two groups: decay on the matrices (here the first two parameters), none on the rest.
std::vector<torch::optim::OptimizerParamGroup> two_groups(const std::vector<at::Tensor>& p,
                                                          double weight_decay) {
  const auto base = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{p[0], p[1]},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(base).weight_decay(weight_decay)));
  groups.emplace_back(std::vector<at::Tensor>{p[2]},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(base).weight_decay(0.0)));
  return groups;
}

TEST(FusedAdamW, MatchesLibTorchsAdamWOverSteps) {
  for (const bool channels_last : {false, true}) {
    for (const double weight_decay : {0.0, 0.1}) {
      SCOPED_TRACE(std::string(channels_last ? "channels-last" : "contiguous") + ", weight decay " +
                   std::to_string(weight_decay));
      const auto p = make_params(channels_last), r = make_params(channels_last);
      const auto defaults = torch::optim::AdamWOptions(1e-2);
      kernels::FusedAdamW ours(two_groups(p, weight_decay), defaults);
      torch::optim::AdamW ref(two_groups(r, weight_decay), defaults);
      run_steps(ours, p);
      run_steps(ref, r);
      EXPECT_TRUE(ours.last_step_fused());
      expect_same<AdamWState>(ours, p, ref, r);
      EXPECT_FALSE(tensors_close(p[1], make_params(channels_last)[1], 1e-3, "moved"));
    }
  }
  // Decoupled decay is not Adam's L2 term: with decay the two optimizers part (a test that
  // would pass with either formula could not tell them apart).
  const auto p = make_params(false), q = make_params(false);
  kernels::FusedAdamW adamw(two_groups(p, 0.5), torch::optim::AdamWOptions(1e-2));
  kernels::FusedAdam adam(q, torch::optim::AdamOptions(1e-2).weight_decay(0.5));
  run_steps(adamw, p);
  run_steps(adam, q);
  EXPECT_FALSE(tensors_close(p[1], q[1], 1e-6, "AdamW vs Adam"));
}

TEST(FusedAdamW, FallsBackToLibTorchsStepForWhatItDoesNotFuse) {
  const auto p = make_params(false, at::kDouble), r = make_params(false, at::kDouble);
  kernels::FusedAdamW ours(two_groups(p, 0.1), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW ref(two_groups(r, 0.1), torch::optim::AdamWOptions(1e-2));
  run_steps(ours, p);
  run_steps(ref, r);
  EXPECT_FALSE(ours.last_step_fused());
  expect_same<AdamWState>(ours, p, ref, r);
}

TEST(FusedAdamW, StateIsInterchangeableWithLibTorchsAdamW) {
  const auto p = make_params(false), r = make_params(false);
  kernels::FusedAdamW ours(two_groups(p, 0.1), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW ref(two_groups(r, 0.1), torch::optim::AdamWOptions(1e-2));
  expect_interchangeable<AdamWState>(ours, p, ref, r);
}

// The kernel on a slice whose moments the caller keeps, as ShardedAdamW holds them.
TEST(FusedAdamW, TheSliceKernelEqualsAdamWOnThatSlice) {
  const auto r = make_params(false);
  at::Tensor p = r[1].detach().clone();
  at::Tensor m = at::zeros_like(p), v = at::zeros_like(p);
  torch::optim::AdamW ref({r[1]},
                          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1));
  for (int step = 0; step < 5; ++step) {
    set_grads({r[1]}, step);
    const at::Tensor g = r[1].grad();
    ref.step();
    kernels::adamw_update(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                          v.data_ptr<float>(), p.numel(), {1e-2, 0.9, 0.95, 1e-8, 0.1, step + 1});
  }
  EXPECT_TRUE(tensors_close(p, r[1], 1e-6, "parameter"));
  const auto& s = state_of<AdamWState>(ref, r[1]);
  EXPECT_TRUE(tensors_close(m, s.exp_avg(), 1e-6, "exp_avg"));
  EXPECT_TRUE(tensors_close(v, s.exp_avg_sq(), 1e-6, "exp_avg_sq"));
}

}  // namespace
}  // namespace scaffold::train

namespace scaffold::train {
namespace {

using SgdState = torch::optim::SGDParamState;

// FusedSGD against torch::optim::SGD over the steps (the first one creates the momentum buffer):
// CARAML's setting (momentum 0.9, weight decay 1e-4), Nesterov with its dampening 0, dampening
// without Nesterov, plain SGD (no buffer), contiguous and channels-last parameters.
TEST(FusedSGD, MatchesLibTorchsSgdOverSteps) {
  const std::vector<std::pair<std::string, torch::optim::SGDOptions>> settings = {
      {"caraml", torch::optim::SGDOptions(1e-1).momentum(0.9).weight_decay(1e-4)},
      {"nesterov", torch::optim::SGDOptions(1e-1).momentum(0.9).nesterov(true).weight_decay(0.01)},
      {"dampening", torch::optim::SGDOptions(1e-1).momentum(0.5).dampening(0.3)},
      {"plain", torch::optim::SGDOptions(1e-1).weight_decay(0.01)},
  };
  for (const bool channels_last : {false, true}) {
    for (const auto& [name, options] : settings) {
      SCOPED_TRACE(name + (channels_last ? ", channels-last" : ", contiguous"));
      const auto p = make_params(channels_last), r = make_params(channels_last);
      kernels::FusedSGD ours(p, options);
      torch::optim::SGD ref(r, options);
      run_steps(ours, p);
      run_steps(ref, r);
      EXPECT_TRUE(ours.last_step_fused());
      expect_same<SgdState>(ours, p, ref, r);
      EXPECT_FALSE(tensors_close(p[1], make_params(channels_last)[1], 1e-3, "moved"));
    }
  }
}

TEST(FusedSGD, FallsBackToLibTorchsStepForWhatItDoesNotFuse) {
  const auto options = torch::optim::SGDOptions(1e-1).momentum(0.9).weight_decay(1e-4);
  const auto p = make_params(false, at::kDouble), r = make_params(false, at::kDouble);
  kernels::FusedSGD ours(p, options);
  torch::optim::SGD ref(r, options);
  run_steps(ours, p);
  run_steps(ref, r);
  EXPECT_FALSE(ours.last_step_fused());
  expect_same<SgdState>(ours, p, ref, r);
}

// A channels-last 1x1 convolution weight (strides (4, 1, 4, 4)) whose gradient comes back
// contiguous (strides (4, 1, 1, 1)): the same memory, so the step is fused, and equals LibTorch's.
TEST(FusedSGD, AOneByOneWeightWhoseGradientDiffersOnlyInUnitStridesIsFused) {
  const auto options = torch::optim::SGDOptions(1e-1).momentum(0.9).weight_decay(1e-4);
  const auto make = [] {
    at::manual_seed(5);
    // at::empty with the format gives the strides LibTorch's convolution backward gives its
    // channels-last weight gradients; .contiguous(ChannelsLast) would keep (4, 1, 1, 1) here.
    at::Tensor w = at::empty({8, 4, 1, 1}, at::MemoryFormat::ChannelsLast);
    w.copy_(at::randn({8, 4, 1, 1}));
    return std::vector<at::Tensor>{w.requires_grad_(true)};
  };
  const auto p = make(), r = make();
  ASSERT_NE(p[0].strides(), at::randn({8, 4, 1, 1}).strides());
  kernels::FusedSGD ours(p, options);
  torch::optim::SGD ref(r, options);
  for (int step = 0; step < 3; ++step) {
    for (const auto* params : {&p, &r}) {
      at::manual_seed(50 + step);
      (*params)[0].mutable_grad() = at::randn({8, 4, 1, 1});  // contiguous
    }
    ours.step();
    ref.step();
  }
  EXPECT_TRUE(ours.last_step_fused());
  expect_same<SgdState>(ours, p, ref, r);
}

TEST(FusedSGD, StateIsInterchangeableWithLibTorchsSgd) {
  const auto options = torch::optim::SGDOptions(1e-1).momentum(0.9).weight_decay(1e-4);
  const auto p = make_params(false), r = make_params(false);
  kernels::FusedSGD ours(p, options);
  torch::optim::SGD ref(r, options);
  expect_interchangeable<SgdState>(ours, p, ref, r);
}

TEST(SumOfSquares, EqualsAFloat64SumOnAnyNumberOfThreads) {
  const int saved = at::get_num_threads();
  // Around the 64-float step and the 8192-float blocks, and many blocks.
  for (const int64_t n : {0, 1, 63, 64, 65, 8191, 8192, 8193, 100003}) {
    SCOPED_TRACE("n " + std::to_string(n));
    at::manual_seed(n);
    const at::Tensor x = at::randn({n}) * 3.0 + 1.0;
    const double expected = x.to(at::kDouble).square().sum().item<double>();
    at::set_num_threads(1);
    const double one = kernels::sum_of_squares(x.data_ptr<float>(), n);
    at::set_num_threads(2);
    const double two = kernels::sum_of_squares(x.data_ptr<float>(), n);
    EXPECT_NEAR(one, expected, 1e-6 * expected);
    EXPECT_EQ(one, two);
  }
  at::set_num_threads(saved);
}

}  // namespace
}  // namespace scaffold::train
