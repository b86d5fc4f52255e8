// The k2 s2 max pool against LibTorch's at::max_pool3d (an independent implementation): equal
// outputs and input gradients, exactly (a maximum and a routed gradient round nothing), on odd and
// even sizes, batch 2, float32 and bf16, and inputs full of ties (small integers) and NaN, where
// the winner each picks decides the gradient.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <tuple>

#include "core/error.hpp"
#include "kernels/max_pool.hpp"

namespace scaffold::model {
namespace {

struct Result {
  at::Tensor y, dx;
};

template <typename Pool>
Result run(const at::Tensor& x0, const at::Tensor& g, Pool pool) {
  const at::Tensor x = x0.detach().requires_grad_(true);
  const at::Tensor y = pool(x);
  return {y, torch::autograd::grad({y}, {x}, {g})[0]};
}

// LibTorch 1.13 has no bf16 max_pool3d on the CPU: bf16 inputs are pooled in float32 (their
// conversion is exact, and so is the way back, the results being input and gradient values).
Result reference(const at::Tensor& x, const at::Tensor& g) {
  const Result r = run(x.to(at::kFloat), g.to(at::kFloat), [](const at::Tensor& a) {
    return at::max_pool3d(a, {2, 2, 2}, {2, 2, 2});
  });
  return {r.y.to(x.scalar_type()), r.dx.to(x.scalar_type())};
}

// (N, C, D, H, W)
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
class MaxPoolK2S2 : public ::testing::TestWithParam<Shape> {};

void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  // NaN equals NaN here: both must put it in the same places.
  EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(want))) << what;
  EXPECT_TRUE(at::equal(at::nan_to_num(got, 0.0), at::nan_to_num(want, 0.0))) << what;
}

TEST_P(MaxPoolK2S2, EqualsLibTorchInOutputAndGradient) {
  const auto [n, c, d, h, w] = GetParam();
  at::manual_seed(5);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const bool ties : {false, true}) {
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(fmt::format("{} {}, {} threads", c10::toString(dtype),
                                 ties ? "with ties" : "distinct", threads));
        at::set_num_threads(threads);
        at::Tensor x = ties ? at::randint(0, 3, {n, c, d, h, w}) : at::randn({n, c, d, h, w});
        x = x.to(dtype);
        const at::Tensor g =
            at::randn(x.sizes())
                .index({at::indexing::Slice(), at::indexing::Slice(), at::indexing::Slice(0, d / 2),
                        at::indexing::Slice(0, h / 2), at::indexing::Slice(0, w / 2)})
                .contiguous()
                .to(dtype);
        const Result want = reference(x, g);
        const Result got =
            run(x, g, [](const at::Tensor& a) { return kernels::max_pool3d_k2s2(a); });
        expect_equal(got.y, want.y, "output");
        expect_equal(got.dx, want.dx, "input gradient");
      }
    }
  }
  at::set_num_threads(2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MaxPoolK2S2,
                         ::testing::Values(Shape{1, 3, 4, 4, 4},    // whole windows
                                           Shape{2, 2, 5, 7, 9},    // odd sizes: rows left over
                                           Shape{1, 16, 8, 6, 34},  // rows longer than a vector
                                           Shape{2, 1, 2, 2, 2}));  // one window

TEST(MaxPoolK2S2Nan, NanWinsItsWindowAsInLibTorch) {
  at::Tensor x = at::randn({1, 2, 4, 4, 4});
  x.index_put_({0, 0, 1, 1, 1}, NAN);  // one NaN in a window
  x.index_put_({0, 1, 0, 0, 0}, NAN);  // two NaN in one window: LibTorch keeps the last
  x.index_put_({0, 1, 1, 1, 1}, NAN);
  const at::Tensor g = at::randn({1, 2, 2, 2, 2});
  const Result want = reference(x, g);
  const Result got = run(x, g, [](const at::Tensor& a) { return kernels::max_pool3d_k2s2(a); });
  expect_equal(got.y, want.y, "output");
  expect_equal(got.dx, want.dx, "input gradient");
  EXPECT_TRUE(std::isnan(got.y[0][0][0][0][0].item<float>()));
}

TEST(MaxPoolK2S2Refusal, NamesWhatItTakes) {
  EXPECT_FALSE(kernels::max_pool3d_k2s2_supported(at::randn({1, 2, 4, 4, 4}, at::kDouble)));
  EXPECT_FALSE(kernels::max_pool3d_k2s2_supported(at::randn({2, 4, 4, 4})));
  const at::Tensor cl = at::randn({1, 4, 4, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast3d);
  EXPECT_FALSE(kernels::max_pool3d_k2s2_supported(cl));
  try {
    kernels::max_pool3d_k2s2(cl);
    FAIL() << "expected core::Error";
  } catch (const core::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not contiguous"), std::string::npos) << what;
    EXPECT_NE(what.find("float32 or bf16"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace scaffold::model
