// batched_matmul against LibTorch's bmm: the product and the gradients of a random linear
// functional of it with respect to both inputs, float64 within 1e-12 and float32 within 1e-5 of
// the reference's largest magnitude (the same sums, in another order), over shapes with odd
// extents (dot products shorter than, equal to and longer than the 16 partial sums), a batch of
// one, non-contiguous inputs, and the FNO's per-mode shape. Also what it refuses.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/batched_matmul.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::tensors_close;

// (y, da, db) of y = op(a, b) and the gradients of sum(y * g).
template <typename Op>
std::vector<at::Tensor> run(const at::Tensor& a0, const at::Tensor& b0, const at::Tensor& g,
                            Op op) {
  const at::Tensor a = a0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
  const at::Tensor y = op(a, b);
  const auto grads = torch::autograd::grad({y}, {a, b}, {g});
  return {y, grads[0], grads[1]};
}

class BatchedMatmulShapes
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(BatchedMatmulShapes, EqualsLibTorchsBmmAndItsGradients) {
  const auto [k, m, i, n] = GetParam();
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    at::manual_seed(21);
    const at::Tensor a = at::randn({k, m, i}, dtype), b = at::randn({k, i, n}, dtype);
    const at::Tensor g = at::randn({k, m, n}, dtype);
    const auto got =
        run(a, b, g, [](const at::Tensor& x, const at::Tensor& y) { return batched_matmul(x, y); });
    const auto want = run(a.to(at::kDouble), b.to(at::kDouble), g.to(at::kDouble),
                          [](const at::Tensor& x, const at::Tensor& y) { return at::bmm(x, y); });
    if (k == 0) {  // nothing to compare but the shapes (tensors_close needs an element)
      EXPECT_EQ(got[0].sizes(), want[0].sizes());
      EXPECT_EQ(got[1].sizes(), a.sizes());
      EXPECT_EQ(got[2].sizes(), b.sizes());
      continue;
    }
    const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
    const std::string tag = std::string(c10::toString(dtype)) + " " + std::to_string(k) + "x" +
                            std::to_string(m) + "x" + std::to_string(i) + "x" + std::to_string(n);
    EXPECT_TRUE(tensors_close(got[0], want[0], tol, "product, " + tag));
    EXPECT_TRUE(tensors_close(got[1], want[1], tol, "gradient of a, " + tag));
    EXPECT_TRUE(tensors_close(got[2], want[2], tol, "gradient of b, " + tag));
    EXPECT_EQ(got[0].scalar_type(), dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchedMatmulShapes,
                         ::testing::Values(std::make_tuple(1, 1, 1, 1),
                                           std::make_tuple(3, 2, 5, 7),      // N < 16 lanes
                                           std::make_tuple(5, 4, 16, 16),    // N = 16
                                           std::make_tuple(2, 3, 33, 37),    // N = 2 x 16 + 5
                                           std::make_tuple(512, 4, 64, 64),  // the FNO's modes
                                           std::make_tuple(0, 4, 8, 8)));    // no modes (a shard)

TEST(BatchedMatmul, TakesNonContiguousInputs) {
  at::manual_seed(22);
  const at::Tensor a = at::randn({6, 4, 3}, at::kDouble).transpose(1, 2);     // (6, 3, 4)
  const at::Tensor b = at::randn({4, 6, 5}, at::kDouble).permute({1, 0, 2});  // (6, 4, 5)
  EXPECT_TRUE(tensors_close(batched_matmul(a, b), at::bmm(a, b), 1e-12, "non-contiguous"));
}

TEST(BatchedMatmul, RefusesWhatItCannotTake) {
  const at::Tensor a = at::randn({2, 3, 4}), b = at::randn({2, 4, 5});
  EXPECT_TRUE(batched_matmul_supported(a, b));
  EXPECT_FALSE(batched_matmul_supported(a, b.to(at::kDouble)));  // mixed dtypes
  EXPECT_FALSE(batched_matmul_supported(a.to(at::kBFloat16), b.to(at::kBFloat16)));
  EXPECT_FALSE(batched_matmul_supported(a, at::randn({2, 3, 5})));  // inner extents
  EXPECT_FALSE(batched_matmul_supported(a, at::randn({3, 4, 5})));  // batch sizes
  EXPECT_FALSE(batched_matmul_supported(a[0], b[0]));               // 2-D
  EXPECT_THROW(batched_matmul(a, at::randn({2, 3, 5})), core::Error);
}

}  // namespace
}  // namespace scaffold::kernels
