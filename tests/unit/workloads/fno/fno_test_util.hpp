// Helpers of the FNO data tests: max-abs error with the first offending element, and float64
// tensors from std::vector (references computed in the tests in plain double loops).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

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

// Runs LibTorch single-threaded in this test (the generators do, too).
struct SingleThreaded : ::testing::Test {
  void SetUp() override { at::set_num_threads(1); }
};

}  // namespace scaffold::fno::test
