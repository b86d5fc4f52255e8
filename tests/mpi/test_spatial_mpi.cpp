// Spatial parallelism against the unsharded computation: the halo convolution (forward, input and
// weight gradients) and the whole U-Net (logits, loss, every parameter gradient; also with
// activation checkpointing) on every layout the world size allows; `dc_groupnorm: local` shown to
// differ; the fused GroupNorm + ReLU's global mode against the unsharded composition, alone and
// in the U-Net. Run under mpiexec -n 2, 4 and 8.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <array>
#include <string>
#include <vector>

#include "kernels/fused_norm.hpp"
#include "spatial_test_util.hpp"
#include "workloads/scaffold/loss.hpp"
#include "workloads/scaffold/model/spatial.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold {
namespace {

using test::world;

// The layouts (D, H, W shard counts) this world size can run, each once.
std::vector<std::array<int, 3>> layouts_for(int world_size,
                                            const std::vector<std::array<int, 3>>& all) {
  std::vector<std::array<int, 3>> out;
  for (const auto& l : all)
    if (world_size % (l[0] * l[1] * l[2]) == 0 && l[0] * l[1] * l[2] > 1) out.push_back(l);
  return out;
}

std::string name(const std::array<int, 3>& l) {
  return "[" + std::to_string(l[0]) + "," + std::to_string(l[1]) + "," + std::to_string(l[2]) + "]";
}

// conv3d_same on local shards of an uneven volume (D 7, H 6, W 5) equals the full convolution:
// output, input gradient and the weight/bias gradients summed over the group, 1e-5 relative.
TEST(HaloConvolution, EqualsTheUnshardedConvolution) {
  const auto layouts =
      layouts_for(world().size(), {{2, 1, 1}, {1, 1, 2}, {4, 1, 1}, {1, 2, 2}, {2, 2, 2}});
  ASSERT_FALSE(layouts.empty()) << "world size " << world().size();
  for (const auto& layout : layouts) {
    SCOPED_TRACE("layout " + name(layout));
    test::SpatialSetup s(layout);
    torch::manual_seed(11);  // the same full tensors on every rank
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor x_full = at::randn({2, 3, 7, 6, 5}, opts);
    const at::Tensor w_full = at::randn({4, 3, 3, 3, 3}, opts);
    const at::Tensor b_full = at::randn({4}, opts);
    const at::Tensor r_full = at::randn({2, 4, 7, 6, 5}, opts);  // d loss / d output

    at::Tensor xr = x_full.clone().requires_grad_(true), wr = w_full.clone().requires_grad_(true),
               br = b_full.clone().requires_grad_(true);
    const at::Tensor yr = at::conv3d(xr, wr, br, {1, 1, 1}, {1, 1, 1});
    (yr * r_full).sum().backward();

    at::Tensor xl = test::local_slice(x_full, *s.ctx).requires_grad_(true);
    at::Tensor wl = w_full.clone().requires_grad_(true), bl = b_full.clone().requires_grad_(true);
    const at::Tensor yl = model::conv3d_same(xl, wl, bl, s.ctx);
    (yl * test::local_slice(r_full, *s.ctx)).sum().backward();

    EXPECT_LT(test::relative_error(yl, test::local_slice(yr, *s.ctx)), 1e-5);
    EXPECT_LT(test::relative_error(xl.grad(), test::local_slice(xr.grad(), *s.ctx)), 1e-5);
    EXPECT_LT(test::relative_error(test::group_sum(*s.group, wl.grad()), wr.grad()), 1e-5);
    EXPECT_LT(test::relative_error(test::group_sum(*s.group, bl.grad()), br.grad()), 1e-5);
    // The comparison can fail: a convolution padded with zeros instead of halos differs.
    const at::Tensor zero_padded = at::conv3d(xl.detach(), w_full, b_full, {1, 1, 1}, {1, 1, 1});
    EXPECT_GT(test::relative_error(zero_padded, test::local_slice(yr, *s.ctx)), 1e-3);
  }
}

// The fused GroupNorm + ReLU with global statistics on local shards of an uneven volume equals
// relu(group_norm) of the full tensor: output, input gradient, and the weight/bias gradients
// summed over the group, 1e-5 relative.
TEST(FusedGroupNormRelu, GlobalStatisticsEqualTheUnshardedComposition) {
  const auto layouts =
      layouts_for(world().size(), {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {2, 2, 2}});
  ASSERT_FALSE(layouts.empty()) << "world size " << world().size();
  for (const auto& layout : layouts) {
    for (const int64_t groups : {1, 4}) {
      SCOPED_TRACE("layout " + name(layout) + ", groups " + std::to_string(groups));
      test::SpatialSetup s(layout);
      torch::manual_seed(13);
      const at::Tensor x_full = at::randn({2, 8, 7, 6, 5}) * 2 + 0.5;
      const at::Tensor w_full = at::randn({8}), b_full = at::randn({8}) * 0.5;
      const at::Tensor r_full = at::randn({2, 8, 7, 6, 5});

      const at::Tensor xr = x_full.clone().requires_grad_(true),
                       wr = w_full.clone().requires_grad_(true),
                       br = b_full.clone().requires_grad_(true);
      const at::Tensor yr = at::relu(at::group_norm(xr, groups, wr, br, 1e-5));
      const auto want = torch::autograd::grad({yr}, {xr, wr, br}, {r_full});

      const at::Tensor xl = test::local_slice(x_full, *s.ctx).requires_grad_(true);
      const at::Tensor wl = w_full.clone().requires_grad_(true),
                       bl = b_full.clone().requires_grad_(true);
      const at::Tensor yl =
          kernels::group_norm_relu(xl, groups, wl, bl, 1e-5, model::group_norm_reduction(s.ctx));
      const auto got =
          torch::autograd::grad({yl}, {xl, wl, bl}, {test::local_slice(r_full, *s.ctx)});

      EXPECT_LT(test::relative_error(yl, test::local_slice(yr, *s.ctx)), 1e-5);
      EXPECT_LT(test::relative_error(got[0], test::local_slice(want[0], *s.ctx)), 1e-5);
      EXPECT_LT(test::relative_error(test::group_sum(*s.group, got[1]), want[1]), 1e-5);
      EXPECT_LT(test::relative_error(test::group_sum(*s.group, got[2]), want[2]), 1e-5);
      // Local statistics (no context) on the shard differ: the comparison can fail.
      const at::Tensor local = kernels::group_norm_relu(xl.detach(), groups, w_full, b_full, 1e-5);
      EXPECT_GT(test::relative_error(local, test::local_slice(yr, *s.ctx)), 1e-3);
    }
  }
}

struct Sample {
  at::Tensor image;   // (1, 3, 16, 16, 16)
  at::Tensor labels;  // (1, 16, 16, 16) int64
};

Sample sample(int index) {
  torch::manual_seed(1000 + index);
  Sample s;
  s.image = at::randn({1, 3, 16, 16, 16});
  s.labels = at::randint(0, 4, {1, 16, 16, 16}, at::TensorOptions().dtype(at::kLong));
  return s;
}

// Copies every parameter of `from` into `to` (same architecture).
void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to) {
  const auto src = from.parameters();
  auto dst = to.parameters();
  ASSERT_EQ(src.size(), dst.size());
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

struct Outcome {
  at::Tensor logits;  // the local shard (or the full volume for the reference)
  double loss = 0;
  std::vector<at::Tensor> grads;
};

Outcome forward_backward(model::UNet3d& net, const at::Tensor& image, const at::Tensor& labels,
                         const train::SpatialSum& spatial_sum) {
  const at::Tensor weights = at::tensor({0.5f, 1.5f, 1.5f, 1.5f});
  net->zero_grad();
  const at::Tensor logits = net->forward(image);
  const train::LossTerms terms = train::segmentation_loss(logits, labels, weights, spatial_sum);
  terms.loss.backward();
  Outcome out;
  out.logits = logits.detach();
  out.loss = terms.loss.item<double>();
  for (const auto& p : net->parameters()) out.grads.push_back(p.grad().clone());
  return out;
}

// The whole U-Net, sharded with global GroupNorm, equals the unsharded model within 1e-4
// relative: logits of the local shard, the loss, and every parameter gradient (summed over the
// spatial group). With local GroupNorm the logits differ.
TEST(ShardedUNet, GlobalGroupNormEqualsTheUnshardedModel) {
  const auto layouts = layouts_for(world().size(), {{2, 1, 1}, {1, 2, 2}, {4, 1, 1}});
  ASSERT_FALSE(layouts.empty());
  for (const auto& layout : layouts) {
    SCOPED_TRACE("layout " + name(layout));
    test::SpatialSetup s(layout);
    const Sample data = sample(s.grid.replica());
    torch::manual_seed(5);
    model::UNet3d reference(test::small_unet(4));
    const Outcome ref = forward_backward(reference, data.image, data.labels, {});

    model::UNetOptions sharded_options = test::small_unet(4);
    sharded_options.spatial = s.ctx;
    model::UNet3d sharded(sharded_options);
    copy_parameters(*reference, *sharded);
    const std::shared_ptr<const model::SpatialContext> ctx = s.ctx;
    const train::SpatialSum sum = [ctx](const at::Tensor& t) { return model::spatial_sum(t, ctx); };
    const Outcome got = forward_backward(sharded, test::local_slice(data.image, *s.ctx),
                                         test::local_slice(data.labels, *s.ctx, 1), sum);

    EXPECT_NEAR(got.loss, ref.loss, 1e-4 * std::abs(ref.loss));
    EXPECT_LT(test::relative_error(got.logits, test::local_slice(ref.logits, *s.ctx)), 1e-4);
    ASSERT_EQ(got.grads.size(), ref.grads.size());
    const auto names = reference->named_parameters().keys();
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      EXPECT_LT(test::relative_error(test::group_sum(*s.group, got.grads[i]), ref.grads[i]), 1e-4)
          << "gradient of " << names[i];
    }

    // Activation checkpointing recomputes each block, halo exchanges and GroupNorm all-reduces
    // included, in backward: the same gradients.
    model::UNetOptions recompute_options = sharded_options;
    recompute_options.activation_checkpointing = true;
    model::UNet3d recompute(recompute_options);
    copy_parameters(*reference, *recompute);
    const Outcome again = forward_backward(recompute, test::local_slice(data.image, *s.ctx),
                                           test::local_slice(data.labels, *s.ctx, 1), sum);
    EXPECT_NEAR(again.loss, got.loss, 1e-6 * std::abs(got.loss));
    for (std::size_t i = 0; i < got.grads.size(); ++i)
      EXPECT_LT(test::relative_error(again.grads[i], got.grads[i]), 1e-5)
          << "checkpointed gradient of " << names[i];

    // The fused GroupNorm + ReLU in global mode: the same logits and gradients.
    model::UNetOptions fused_options = sharded_options;
    fused_options.kernels.norm = model::NormKernel::Fused;
    model::UNet3d fused(fused_options);
    copy_parameters(*reference, *fused);
    const Outcome f = forward_backward(fused, test::local_slice(data.image, *s.ctx),
                                       test::local_slice(data.labels, *s.ctx, 1), sum);
    EXPECT_NEAR(f.loss, ref.loss, 1e-4 * std::abs(ref.loss));
    EXPECT_LT(test::relative_error(f.logits, test::local_slice(ref.logits, *s.ctx)), 1e-4);
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      EXPECT_LT(test::relative_error(test::group_sum(*s.group, f.grads[i]), ref.grads[i]), 1e-4)
          << "fused: gradient of " << names[i];
    }

    // dc_groupnorm: local normalises each shard by its own statistics: a real difference.
    s.ctx->group_norm = model::GroupNormMode::Local;
    const Outcome local = forward_backward(sharded, test::local_slice(data.image, *s.ctx),
                                           test::local_slice(data.labels, *s.ctx, 1), sum);
    s.ctx->group_norm = model::GroupNormMode::Global;
    // (The logits, not the loss: on random data a scalar aggregate can land close by chance.)
    EXPECT_GT(test::relative_error(local.logits, test::local_slice(ref.logits, *s.ctx)), 1e-3);
  }
}

}  // namespace
}  // namespace scaffold
