// FusedAdam against torch::optim::Adam, the reference: the same parameters and gradients through
// several steps (a learning-rate change between them, with and without weight decay, contiguous
// and channels-last parameters) give parameters and moments within float32 rounding (1e-6 of the
// largest magnitude), and their saved states load into each other.
#include <ATen/ATen.h>
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

const torch::optim::AdamParamState& state_of(const torch::optim::Optimizer& opt,
                                             const at::Tensor& p) {
  return static_cast<const torch::optim::AdamParamState&>(
      *opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
}

void set_grads(const std::vector<at::Tensor>& params, int step) {
  at::manual_seed(100 + step);
  torch::NoGradGuard no_grad;
  for (const at::Tensor& p : params) p.mutable_grad() = at::randn_like(p) * (1.0 + step);
}

void run_steps(torch::optim::Adam& opt, const std::vector<at::Tensor>& params) {
  for (int step = 0; step < 5; ++step) {
    if (step == 3)
      for (auto& group : opt.param_groups()) group.options().set_lr(3e-3);
    set_grads(params, step);
    opt.step();
  }
}

void expect_same(const torch::optim::Optimizer& ours, const std::vector<at::Tensor>& p,
                 const torch::optim::Optimizer& ref, const std::vector<at::Tensor>& r) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    EXPECT_TRUE(tensors_close(p[i], r[i], 1e-6, "parameter"));
    EXPECT_EQ(p[i].strides(), r[i].strides());
    const auto &s = state_of(ours, p[i]), &t = state_of(ref, r[i]);
    EXPECT_EQ(s.step(), t.step());
    EXPECT_TRUE(tensors_close(s.exp_avg(), t.exp_avg(), 1e-6, "exp_avg"));
    EXPECT_TRUE(tensors_close(s.exp_avg_sq(), t.exp_avg_sq(), 1e-6, "exp_avg_sq"));
  }
}

TEST(FusedAdam, MatchesLibTorchsAdamOverSteps) {
  for (const bool channels_last : {false, true}) {
    for (const double weight_decay : {0.0, 0.01}) {
      SCOPED_TRACE(std::string(channels_last ? "channels-last" : "contiguous") + ", weight decay " +
                   std::to_string(weight_decay));
      const auto p = make_params(channels_last), r = make_params(channels_last);
      const auto options = torch::optim::AdamOptions(1e-2).weight_decay(weight_decay);
      FusedAdam ours(p, options);
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
    FusedAdam ours(p, torch::optim::AdamOptions(1e-2));
    torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2));
    run_steps(ours, p);
    run_steps(ref, r);
    EXPECT_FALSE(ours.last_step_fused());
    expect_same(ours, p, ref, r);
  }
  {
    const auto p = make_params(false), r = make_params(false);
    FusedAdam ours(p, torch::optim::AdamOptions(1e-2).amsgrad(true));
    torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2).amsgrad(true));
    run_steps(ours, p);
    run_steps(ref, r);
    EXPECT_FALSE(ours.last_step_fused());
    expect_same(ours, p, ref, r);
  }
}

// A checkpoint written by one loads into the other and the runs go on alike.
TEST(FusedAdam, StateIsInterchangeableWithLibTorchsAdam) {
  const auto p = make_params(false), r = make_params(false);
  FusedAdam ours(p, torch::optim::AdamOptions(1e-2));
  run_steps(ours, p);
  torch::serialize::OutputArchive out;
  ours.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < p.size(); ++i) r[i].copy_(p[i]);
  }
  torch::optim::Adam ref(r, torch::optim::AdamOptions(1e-2));
  torch::serialize::InputArchive in;
  std::istringstream read(bytes.str());
  in.load_from(read);
  ref.load(in);
  expect_same(ours, p, ref, r);
  // The learning rate is the training loop's to set after a resume (it is set every epoch).
  for (torch::optim::Optimizer* opt :
       {static_cast<torch::optim::Optimizer*>(&ours), static_cast<torch::optim::Optimizer*>(&ref)})
    for (auto& group : opt->param_groups()) group.options().set_lr(1e-2);
  run_steps(ours, p);
  run_steps(ref, r);
  expect_same(ours, p, ref, r);
}

}  // namespace
}  // namespace scaffold::train
