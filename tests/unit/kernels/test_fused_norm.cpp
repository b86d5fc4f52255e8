// The fused GroupNorm + ReLU (kernels/fused_norm.hpp) against the unfused composition, torch's
// group_norm then relu: output and the gradients of input, weight and bias within 1e-5 relative
// (float32) on several shapes, groups 1 and 8, batch 1 and 2, odd spatial sizes; bf16 input with
// float32 statistics; the inputs it refuses; the U-Net with the fused kernel against the unfused
// one.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/fused_norm.hpp"
#include "unit/tensor_compare.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold::model {
namespace {

using test::tensors_close;

struct Case {
  std::vector<int64_t> shape;  // (N, C, D, H, W)
  int64_t groups;
};

std::string describe(const Case& c) {
  std::string s = "shape [";
  for (std::size_t i = 0; i < c.shape.size(); ++i) s += (i ? "," : "") + std::to_string(c.shape[i]);
  return s + "], groups " + std::to_string(c.groups);
}

struct Result {
  at::Tensor y, dx, dw, db;
};

// relu(group_norm(x)) by `fused` or the reference ops, with the gradients for upstream `r`.
Result run(bool fused, const at::Tensor& x0, int64_t groups, const at::Tensor& w0,
           const at::Tensor& b0, const at::Tensor& r) {
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const at::Tensor w = w0.detach().clone().requires_grad_(true);
  const at::Tensor b = b0.detach().clone().requires_grad_(true);
  // The reference runs in the parameters' dtype (float32, or float64 for an exact reference).
  const at::Tensor y = fused ? kernels::group_norm_relu(x, groups, w, b, 1e-5)
                             : at::relu(at::group_norm(x.to(w.scalar_type()), groups, w, b, 1e-5));
  const auto grads = torch::autograd::grad({y}, {x, w, b}, {r});
  return {y.detach(), grads[0], grads[1], grads[2]};
}

// Random input with a per-channel offset and scale (conv outputs are not zero-mean), random affine
// parameters (not the 1 / 0 defaults, so both enter), random upstream gradient.
struct Inputs {
  at::Tensor x, w, b, r;
};
Inputs inputs(const Case& c, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t channels = c.shape[1];
  std::vector<int64_t> per_channel(c.shape.size(), 1);
  per_channel[1] = channels;
  Inputs in;
  in.x = at::randn(c.shape) * (at::rand(per_channel) * 3 + 0.2) + at::randn(per_channel) * 2;
  in.w = at::randn({channels});
  in.b = at::randn({channels}) * 0.5;
  in.r = at::randn(c.shape);
  return in;
}

const std::vector<Case> kCases = {
    {{1, 8, 5, 7, 3}, 1},    {{1, 8, 5, 7, 3}, 8},    {{2, 16, 7, 5, 9}, 8}, {{2, 8, 3, 3, 3}, 1},
    {{1, 16, 9, 11, 13}, 8}, {{2, 32, 17, 9, 15}, 8}, {{1, 8, 1, 1, 3}, 4},  {{2, 4, 33, 1, 65}, 1},
};

TEST(FusedGroupNormRelu, MatchesGroupNormThenReluInFloat32) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Inputs in = inputs(c, 7);
    const Result want = run(false, in.x, c.groups, in.w, in.b, in.r);
    const Result got = run(true, in.x, c.groups, in.w, in.b, in.r);
    EXPECT_TRUE(tensors_close(got.y, want.y, 1e-5, "output"));
    EXPECT_TRUE(tensors_close(got.dx, want.dx, 1e-5, "input gradient"));
    EXPECT_TRUE(tensors_close(got.dw, want.dw, 1e-5, "weight gradient"));
    EXPECT_TRUE(tensors_close(got.db, want.db, 1e-5, "bias gradient"));
  }
}

// A larger layer (several blocks per channel), and a large mean against a small spread (|mean|
// ~ 50 std), against the float64 composition: torch's float32 kernels lose digits there (their
// input gradient was 0.3 off), the fused kernel's centred sums do not.
TEST(FusedGroupNormRelu, MatchesTheFloat64CompositionOnALayerShapeAndWithALargeMean) {
  const Case layer{{1, 16, 32, 32, 32}, 8};
  const Inputs in = inputs(layer, 3);
  for (const double offset : {0.0, 100.0}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const at::Tensor x = in.x + offset;
    const Result want = run(false, x.to(at::kDouble), layer.groups, in.w.to(at::kDouble),
                            in.b.to(at::kDouble), in.r.to(at::kDouble));
    const Result got = run(true, x, layer.groups, in.w, in.b, in.r);
    EXPECT_TRUE(tensors_close(got.y, want.y, 1e-5, "output"));
    EXPECT_TRUE(tensors_close(got.dx, want.dx, 1e-5, "input gradient"));
    EXPECT_TRUE(tensors_close(got.dw, want.dw, 1e-5, "weight gradient"));
    EXPECT_TRUE(tensors_close(got.db, want.db, 1e-5, "bias gradient"));
  }
}

// bf16 input (an autocast conv output) with float32 statistics and output: the reference casts
// it to float32 first. dx comes back in bf16, rounded from the same float32 value: 1e-2.
TEST(FusedGroupNormRelu, Bf16InputWithFloat32Statistics) {
  for (const Case& c : {Case{{1, 16, 9, 11, 13}, 8}, Case{{2, 8, 5, 7, 3}, 1}}) {
    SCOPED_TRACE(describe(c));
    const Inputs in = inputs(c, 9);
    const at::Tensor xb = in.x.to(at::kBFloat16);
    const Result want = run(false, xb, c.groups, in.w, in.b, in.r);
    const Result got = run(true, xb, c.groups, in.w, in.b, in.r);
    EXPECT_EQ(got.y.scalar_type(), at::kFloat);
    EXPECT_EQ(got.dx.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(tensors_close(got.y, want.y, 1e-5, "output"));
    EXPECT_TRUE(tensors_close(got.dx, want.dx, 1e-2, "input gradient"));
    EXPECT_TRUE(tensors_close(got.dw, want.dw, 1e-5, "weight gradient"));
    EXPECT_TRUE(tensors_close(got.db, want.db, 1e-5, "bias gradient"));
  }
}

TEST(FusedGroupNormRelu, RefusesWhatItDoesNotRunWithAReason) {
  const at::Tensor x = at::randn({2, 8, 3, 4, 5});
  const at::Tensor w = at::ones({8}), b = at::zeros({8});
  EXPECT_EQ(kernels::group_norm_relu_unsupported(x, 4, w, b), "");
  const at::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  EXPECT_NE(kernels::group_norm_relu_unsupported(cl, 4, w, b).find("non-contiguous"),
            std::string::npos);
  EXPECT_NE(kernels::group_norm_relu_unsupported(x.to(at::kDouble), 4, w, b).find("dtype"),
            std::string::npos);
  EXPECT_NE(kernels::group_norm_relu_unsupported(x, 3, w, b).find("3 groups do not divide 8"),
            std::string::npos);
  EXPECT_NE(kernels::group_norm_relu_unsupported(x, 4, w.to(at::kBFloat16), b).find("float32"),
            std::string::npos);
  EXPECT_THROW(kernels::group_norm_relu(cl, 4, w, b, 1e-5), core::Error);
}

// The U-Net with the fused kernel computes what the unfused one does: logits and every
// parameter gradient, 1e-4 relative (errors compound through the layers).
TEST(FusedGroupNormRelu, UNetMatchesTheUnfusedModel) {
  UNetOptions o;
  o.in_channels = 3;
  o.n_classes = 4;
  o.layers = 2;
  o.base_channels = 8;
  o.group_norm_groups = 4;
  torch::manual_seed(5);
  UNet3d unfused(o);
  o.kernels.norm = NormKernel::Fused;
  UNet3d fused(o);
  {
    torch::NoGradGuard no_grad;
    const auto src = unfused->parameters();
    auto dst = fused->parameters();
    for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  const at::Tensor image = at::randn({2, 3, 12, 8, 16});
  const at::Tensor y_ref = unfused->forward(image);
  const at::Tensor y = fused->forward(image);
  EXPECT_TRUE(tensors_close(y, y_ref, 1e-4, "logits"));
  const at::Tensor r = at::randn(y.sizes());
  (y_ref * r).sum().backward();
  (y * r).sum().backward();
  const auto names = unfused->named_parameters().keys();
  const auto want = unfused->parameters(), got = fused->parameters();
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(tensors_close(got[i].grad(), want[i].grad(), 1e-4, "gradient of " + names[i]));
}

}  // namespace
}  // namespace scaffold::model
