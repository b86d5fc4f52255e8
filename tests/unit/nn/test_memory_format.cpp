// nn::set_memory_format on the U-Net (ChannelsLast3d, what ScaFFold trains with on GPUs) and on
// 4-D weights: exactly the 5-D (or 4-D) tensors change layout, each keeps its identity (so an
// optimiser made before still holds them), the values do not change, and a channels-last U-Net
// fed a channels-last input computes what the contiguous one does (output and every gradient
// within 1e-5 relative: the kernels differ, the arithmetic does not), with gradients in the
// parameters' layout. Contiguous converts back.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <string>

#include "nn/memory_format.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold::model {
namespace {

using test::tensors_close;

UNetOptions options() {
  UNetOptions o;
  o.in_channels = 3;
  o.n_classes = 3;
  o.layers = 2;
  o.base_channels = 8;
  o.group_norm_groups = 4;
  return o;
}

TEST(MemoryFormat, ChannelsLast3dConvertsThe5dParametersInPlace) {
  torch::manual_seed(1);
  UNet3d net(options());
  std::map<std::string, at::Tensor> before;
  std::map<std::string, const c10::TensorImpl*> impl;
  for (const auto& p : net->named_parameters()) {
    before[p.key()] = p.value().detach().clone();
    impl[p.key()] = p.value().unsafeGetTensorImpl();
  }
  nn::set_memory_format(*net, at::MemoryFormat::ChannelsLast3d);
  int converted = 0;
  for (const auto& p : net->named_parameters()) {
    const at::Tensor& t = p.value();
    EXPECT_EQ(t.unsafeGetTensorImpl(), impl[p.key()])
        << p.key() << ": a new tensor (optimisers would lose it)";
    EXPECT_TRUE(at::equal(t, before[p.key()])) << p.key();
    if (t.dim() == 5) {
      EXPECT_TRUE(t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) << p.key();
      // A 1^3 kernel's strides are the same either way; the 3^3 ones are not NCDHW any more.
      if (t.size(2) > 1) {
        EXPECT_FALSE(t.is_contiguous()) << p.key();
      }
      ++converted;
    } else {
      EXPECT_TRUE(t.is_contiguous()) << p.key();
    }
  }
  EXPECT_GT(converted, 8);
  nn::set_memory_format(*net, at::MemoryFormat::Contiguous);
  for (const auto& p : net->named_parameters()) EXPECT_TRUE(p.value().is_contiguous()) << p.key();
}

TEST(MemoryFormat, ChannelsLastConverts4dWeightsOnly) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3));
  torch::nn::Linear fc(4, 2);
  nn::set_memory_format(*conv, at::MemoryFormat::ChannelsLast);
  nn::set_memory_format(*fc, at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(conv->weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(conv->weight.is_contiguous());
  EXPECT_TRUE(fc->weight.is_contiguous());
  // ChannelsLast3d leaves 4-D tensors alone, and ChannelsLast 5-D ones.
  UNet3d net(options());
  nn::set_memory_format(*net, at::MemoryFormat::ChannelsLast);
  for (const auto& p : net->named_parameters()) EXPECT_TRUE(p.value().is_contiguous()) << p.key();
}

struct Pass {
  at::Tensor out, input_grad;
  std::map<std::string, at::Tensor> grads;
};

Pass forward_backward(bool channels_last) {
  torch::manual_seed(5);
  UNet3d net(options());
  at::Tensor x = at::randn({2, 3, 8, 8, 8});
  const at::Tensor g = at::randn({2, 3, 8, 8, 8});
  if (channels_last) {
    nn::set_memory_format(*net, at::MemoryFormat::ChannelsLast3d);
    x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  }
  x.requires_grad_(true);
  const at::Tensor out = net(x);
  (out * g).sum().backward();
  Pass r{out.detach(), x.grad(), {}};
  for (const auto& p : net->named_parameters()) {
    r.grads[p.key()] = p.value().grad();
    if (channels_last && p.value().dim() == 5) {
      // Autograd gives a parameter its gradient in the parameter's layout.
      EXPECT_TRUE(p.value().grad().is_contiguous(at::MemoryFormat::ChannelsLast3d)) << p.key();
    }
  }
  return r;
}

TEST(MemoryFormat, AChannelsLastUNetComputesWhatTheContiguousOneDoes) {
  const Pass cl = forward_backward(true);
  const Pass plain = forward_backward(false);
  constexpr double kTol = 1e-5;
  EXPECT_TRUE(tensors_close(cl.out, plain.out, kTol, "output"));
  EXPECT_TRUE(tensors_close(cl.input_grad, plain.input_grad, kTol, "input grad"));
  ASSERT_EQ(cl.grads.size(), plain.grads.size());
  for (const auto& [name, grad] : plain.grads)
    EXPECT_TRUE(tensors_close(cl.grads.at(name), grad, kTol, "grad " + name));
}

}  // namespace
}  // namespace scaffold::model
