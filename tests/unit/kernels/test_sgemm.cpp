// Our float32 sgemm (kernels/sgemm.hpp) against at::mm in float64 on the same inputs: within 1e-5
// of the reference's largest magnitude (float32 sums of up to 600 terms, in another order), for
// every transpose, extents that leave partial register tiles, several reduction and column
// blocks, rows split over threads, row strides wider than the rows, accumulation into C, an empty
// reduction, and both register tilings (the AVX-512 one runs, spilled, on any CPU). The threads
// split C, never a sum, so 1 and 2 threads must agree to the bit.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/sgemm.hpp"
#include "kernels/simd.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::tensors_close;

struct Case {
  int64_t m, n, k;
};

// op(A) (m x k) stored as a (m x k) or, transposed, (k x m), inside a buffer `pad` columns wider
// than its rows; likewise op(B) (k x n) and C (m x n). Returns C after sgemm, C0 + op(A) op(B) in
// float64 as the reference.
struct Product {
  at::Tensor got, ref;
};
Product run(const Case& c, bool trans_a, bool trans_b, bool accumulate, int64_t pad) {
  const at::Tensor a_store = at::randn({trans_a ? c.k : c.m, (trans_a ? c.m : c.k) + pad});
  const at::Tensor b_store = at::randn({trans_b ? c.n : c.k, (trans_b ? c.k : c.n) + pad});
  const at::Tensor c_store = at::randn({c.m, c.n + pad});
  const at::Tensor a = a_store.narrow(1, 0, trans_a ? c.m : c.k);
  const at::Tensor b = b_store.narrow(1, 0, trans_b ? c.k : c.n);
  const at::Tensor op_a = trans_a ? a.t() : a, op_b = trans_b ? b.t() : b;
  at::Tensor ref = at::mm(op_a.to(at::kDouble), op_b.to(at::kDouble));
  if (accumulate) ref += c_store.narrow(1, 0, c.n).to(at::kDouble);
  at::Tensor out = c_store.clone();
  sgemm(trans_a, trans_b, c.m, c.n, c.k, a_store.data_ptr<float>(), a_store.size(1),
        b_store.data_ptr<float>(), b_store.size(1), out.data_ptr<float>(), out.size(1), accumulate);
  // The padding columns of C are not C's: untouched.
  EXPECT_TRUE(at::equal(out.narrow(1, c.n, pad), c_store.narrow(1, c.n, pad)));
  return {out.narrow(1, 0, c.n), ref};
}

class SgemmCases : public ::testing::TestWithParam<std::tuple<Case, bool, bool>> {};

TEST_P(SgemmCases, EqualsFloat64MatrixProductInBothTilings) {
  const auto& [c, trans_a, trans_b] = GetParam();
  for (const int wide : {0, 1}) {
    simd::force_wide_registers(wide);
    for (const bool accumulate : {false, true}) {
      at::manual_seed(3);
      const Product r = run(c, trans_a, trans_b, accumulate, accumulate ? 3 : 0);
      EXPECT_TRUE(tensors_close(
          r.got, r.ref, 1e-5,
          "wide " + std::to_string(wide) + " accumulate " + std::to_string(accumulate)));
    }
  }
  simd::force_wide_registers(-1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SgemmCases,
    ::testing::Combine(::testing::Values(Case{1, 1, 1}, Case{7, 5, 3}, Case{29, 37, 70},
                                         Case{13, 100, 600},  // 3 and 5 reduction blocks
                                         Case{150, 33, 20},   // > 144 rows: two row blocks
                                         Case{3, 4100, 5}),   // > 4096 columns: two blocks
                       ::testing::Bool(), ::testing::Bool()));

TEST(Sgemm, OneAndTwoThreadsAgreeToTheBit) {
  at::manual_seed(4);
  const int saved = at::get_num_threads();
  // Split by rows; by columns once (op(B) as stored); by columns in chunks on demand (op(B)
  // transposed, 4 chunks of 48 columns on 2 threads).
  for (const auto& [c, trans_b] :
       {std::make_pair(Case{300, 40, 270}, false), std::make_pair(Case{40, 300, 270}, false),
        std::make_pair(Case{40, 190, 270}, true)}) {
    const at::Tensor a = at::randn({c.m, c.k});
    const at::Tensor b = trans_b ? at::randn({c.n, c.k}) : at::randn({c.k, c.n});
    at::Tensor one = at::empty({c.m, c.n}), two = at::empty({c.m, c.n});
    for (const int threads : {1, 2}) {
      at::set_num_threads(threads);
      sgemm(false, trans_b, c.m, c.n, c.k, a.data_ptr<float>(), c.k, b.data_ptr<float>(), b.size(1),
            (threads == 1 ? one : two).data_ptr<float>(), c.n, false);
    }
    EXPECT_TRUE(at::equal(one, two)) << c.m << "x" << c.n;
    const at::Tensor op_b = trans_b ? b.t() : b;
    EXPECT_TRUE(
        tensors_close(two, at::mm(a.to(at::kDouble), op_b.to(at::kDouble)), 1e-5, "2 threads"));
  }
  at::set_num_threads(saved);
}

TEST(Sgemm, AnEmptyReductionZeroesCOrLeavesIt) {
  const at::Tensor before = at::randn({4, 5});
  at::Tensor c = before.clone();
  const float unused = 0;
  sgemm(false, false, 4, 5, 0, &unused, 1, &unused, 5, c.data_ptr<float>(), 5, true);
  EXPECT_TRUE(at::equal(c, before));
  sgemm(false, false, 4, 5, 0, &unused, 1, &unused, 5, c.data_ptr<float>(), 5, false);
  EXPECT_TRUE(at::equal(c, at::zeros({4, 5})));
}

}  // namespace
}  // namespace scaffold::kernels
