// The fused BatchNorm (+ add) + ReLU (kernels/batch_norm.hpp) against the composition it
// replaces, at::batch_norm in training mode, then the add, then relu: output, the gradients of
// input, weight, bias and residual, and the updated running statistics within 1e-5 relative
// (float32) on shapes with few and many channels, one row block and many, odd sizes; against the
// float64 composition where the mean is large against the spread; on 1 and 2 threads; the inputs
// it refuses.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/batch_norm.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::tensors_close;

constexpr double kMomentum = 0.1, kEps = 1e-5;

struct Inputs {
  at::Tensor x, w, b, res, r, running_mean, running_var;  // r: the upstream gradient
};

// Channels-last input with a per-channel offset and scale (conv outputs are not zero-mean), random
// affine parameters and running statistics (so the update's both terms enter), random upstream
// gradient; a residual of the input's shape.
Inputs inputs(const std::vector<int64_t>& shape, uint64_t seed, at::ScalarType dtype = at::kFloat) {
  torch::manual_seed(seed);
  const int64_t c = shape[1];
  const auto cl = at::MemoryFormat::ChannelsLast;
  Inputs in;
  in.x = (at::randn(shape) * (at::rand({1, c, 1, 1}) * 3 + 0.2) + at::randn({1, c, 1, 1}) * 2)
             .to(dtype)
             .contiguous(cl);
  in.w = at::randn({c}).to(dtype);
  in.b = (at::randn({c}) * 0.5).to(dtype);
  in.res = at::randn(shape).to(dtype).contiguous(cl);
  in.r = at::randn(shape).to(dtype).contiguous(cl);
  in.running_mean = at::randn({c}).to(dtype);
  in.running_var = (at::rand({c}) + 0.5).to(dtype);
  return in;
}

struct Result {
  at::Tensor y, dx, dw, db, dres, running_mean, running_var;
};

Result run(bool fused, const Inputs& in, bool with_residual) {
  const at::Tensor x = in.x.detach().clone().requires_grad_(true);
  const at::Tensor w = in.w.detach().clone().requires_grad_(true);
  const at::Tensor b = in.b.detach().clone().requires_grad_(true);
  const at::Tensor res =
      with_residual ? in.res.detach().clone().requires_grad_(true) : at::Tensor();
  const at::Tensor rm = in.running_mean.clone(), rv = in.running_var.clone();
  at::Tensor y;
  if (fused) {
    y = batch_norm_relu(x, w, b, rm, rv, kMomentum, kEps, res);
  } else {
    at::Tensor pre = at::batch_norm(x, w, b, rm, rv, /*training=*/true, kMomentum, kEps,
                                    /*cudnn_enabled=*/false);
    y = at::relu(with_residual ? pre + res : pre);
  }
  std::vector<at::Tensor> wrt = {x, w, b};
  if (with_residual) wrt.push_back(res);
  const auto grads = torch::autograd::grad({y}, wrt, {in.r});
  return {y.detach(), grads[0], grads[1], grads[2], with_residual ? grads[3] : at::Tensor(),
          rm,         rv};
}

void expect_close(const Result& got, const Result& want, double tol) {
  EXPECT_TRUE(tensors_close(got.y, want.y, tol, "output"));
  EXPECT_TRUE(tensors_close(got.dx, want.dx, tol, "input gradient"));
  EXPECT_TRUE(tensors_close(got.dw, want.dw, tol, "weight gradient"));
  EXPECT_TRUE(tensors_close(got.db, want.db, tol, "bias gradient"));
  if (want.dres.defined()) {
    EXPECT_TRUE(tensors_close(got.dres, want.dres, tol, "residual gradient"));
  }
  EXPECT_TRUE(tensors_close(got.running_mean, want.running_mean, tol, "running_mean"));
  EXPECT_TRUE(tensors_close(got.running_var, want.running_var, tol, "running_var"));
}

std::string describe(const std::vector<int64_t>& shape, bool residual, int threads) {
  std::string s = "shape [";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "], residual " + std::to_string(residual) + ", threads " + std::to_string(threads);
}

// Few and many channels (1 row block, many blocks, a partial last block), a single pixel per
// example.
const std::vector<std::vector<int64_t>> kShapes = {
    {2, 8, 5, 7},    {1, 64, 9, 9},  {4, 3, 1, 1},    {3, 16, 17, 1},
    {2, 64, 33, 29}, {2, 256, 7, 7}, {1, 2048, 2, 3}, {8, 5, 6, 11},
};

TEST(FusedBatchNormRelu, MatchesBatchNormAddReluInFloat32) {
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& shape : kShapes) {
      for (const bool residual : {false, true}) {
        SCOPED_TRACE(describe(shape, residual, threads));
        const Inputs in = inputs(shape, 11);
        expect_close(run(true, in, residual), run(false, in, residual), 1e-5);
      }
    }
  }
  at::set_num_threads(threads_before);
}

// Two values per channel, the fewest training mode allows: the normalised values are -1 and 1
// up to eps, so the input gradient is all cancellation (eps / variance of the gradient's scale,
// or rounding noise where the variance is large: not comparable relatively). It is compared
// against the scale it cancels from, rstd·|w|·max|dy| per channel; the rest relatively.
TEST(FusedBatchNormRelu, TwoValuesPerChannel) {
  const Inputs in = inputs({2, 6, 1, 1}, 13);
  for (const bool residual : {false, true}) {
    SCOPED_TRACE("residual " + std::to_string(residual));
    const Result want = run(false, in, residual), got = run(true, in, residual);
    EXPECT_TRUE(tensors_close(got.y, want.y, 1e-5, "output"));
    const at::Tensor x64 = in.x.to(at::kDouble);
    const at::Tensor rstd = (x64.var({0, 2, 3}, /*unbiased=*/false) + kEps).rsqrt();  // (C)
    const double scale =
        (rstd * in.w.to(at::kDouble).abs()).max().item<double>() * in.r.abs().max().item<double>();
    EXPECT_LT((got.dx.to(at::kDouble) - want.dx.to(at::kDouble)).abs().max().item<double>(),
              1e-5 * scale);
    EXPECT_TRUE(tensors_close(got.dw, want.dw, 1e-5, "weight gradient"));
    EXPECT_TRUE(tensors_close(got.db, want.db, 1e-5, "bias gradient"));
    EXPECT_TRUE(tensors_close(got.running_var, want.running_var, 1e-5, "running_var"));
  }
}

// A mean of ~100 against a spread of ~1 and many blocks per thread, against the float64
// composition: the fused kernel's statistics are float64 two-pass moments per block.
TEST(FusedBatchNormRelu, MatchesTheFloat64CompositionWithALargeMean) {
  const std::vector<int64_t> shape = {4, 32, 40, 40};
  for (const double offset : {0.0, 100.0}) {
    for (const bool residual : {false, true}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", residual " + std::to_string(residual));
      Inputs in = inputs(shape, 5);
      in.x = (in.x + offset).contiguous(at::MemoryFormat::ChannelsLast);
      Inputs in64 = in;
      for (at::Tensor* t :
           {&in64.x, &in64.w, &in64.b, &in64.res, &in64.r, &in64.running_mean, &in64.running_var})
        *t = t->to(at::kDouble);
      expect_close(run(true, in, residual), run(false, in64, residual), 1e-5);
    }
  }
}

TEST(FusedBatchNormRelu, RefusesWhatItDoesNotRunWithAReason) {
  const Inputs in = inputs({2, 8, 3, 4}, 1);
  const auto why = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& rm,
                       const at::Tensor& res) {
    return batch_norm_relu_unsupported(x, w, in.b, rm, in.running_var, res);
  };
  EXPECT_EQ(why(in.x, in.w, in.running_mean, in.res), "");
  EXPECT_EQ(batch_norm_relu_unsupported(in.x, in.w, in.b, at::Tensor(), at::Tensor(), {}), "");
  EXPECT_NE(why(in.x.contiguous(), in.w, in.running_mean, {}).find("not channels-last"),
            std::string::npos);
  EXPECT_NE(why(in.x.to(at::kBFloat16), in.w, in.running_mean, {}).find("float32 only"),
            std::string::npos);
  EXPECT_NE(why(in.x[0].unsqueeze(0).narrow(2, 0, 1).narrow(3, 0, 1).contiguous(
                    at::MemoryFormat::ChannelsLast),
                in.w, in.running_mean, {})
                .find("one value per channel"),
            std::string::npos);
  EXPECT_NE(why(in.x, in.w.narrow(0, 0, 4), in.running_mean, {}).find("8 channels"),
            std::string::npos);
  EXPECT_NE(why(in.x, in.w, at::Tensor(), {}).find("both"), std::string::npos);
  EXPECT_NE(why(in.x, in.w, in.running_mean, in.res.contiguous()).find("residual"),
            std::string::npos);
  EXPECT_THROW(batch_norm_relu(in.x.contiguous(), in.w, in.b, in.running_mean, in.running_var,
                               kMomentum, kEps),
               core::Error);
}

}  // namespace
}  // namespace scaffold::kernels
