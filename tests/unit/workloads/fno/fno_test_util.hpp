// Helpers of the FNO data tests: max-abs error with the first offending element, and float64
// tensors from std::vector (references computed in the tests in plain double loops).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace scaffold::fno::test {

// Fails with the largest error, the tolerance and where it occurs when |a - b| > tol anywhere.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tol,
                         const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor diff = (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().flatten();
  const int64_t worst = diff.argmax().item<int64_t>();
  const double err = diff[worst].item<double>();
  EXPECT_LE(err, tol) << what << ": max |error| " << err << " > tolerance " << tol
                      << " at flat index " << worst << " (actual "
                      << actual.flatten()[worst].item<double>() << ", expected "
                      << expected.flatten()[worst].item<double>() << ")";
}

inline at::Tensor from_vector(const std::vector<double>& v) {
  return at::tensor(v, at::kDouble);
}

// Second order in time: `run(dt)` gives the fields after the same simulated time with step dt;
// the errors at dt 0.1 and 0.05 against dt 0.0125 must fall by a second-order scheme's ratio
// (~4.3 with the reference at dt/8 and dt/4).
inline void expect_second_order(const std::function<at::Tensor(double)>& run) {
  const at::Tensor ref = run(0.0125);
  const double e1 = (run(0.1) - ref).abs().max().item<double>();
  const double e2 = (run(0.05) - ref).abs().max().item<double>();
  EXPECT_GT(e1 / e2, 3.3) << "errors " << e1 << ", " << e2;
  EXPECT_LT(e1 / e2, 5.5) << "errors " << e1 << ", " << e2;
}

// Runs LibTorch single-threaded in this test (the generators do, too).
struct SingleThreaded : ::testing::Test {
  void SetUp() override { at::set_num_threads(1); }
};

}  // namespace scaffold::fno::test
