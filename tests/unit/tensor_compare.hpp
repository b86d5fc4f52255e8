// Tensor comparison for the model tests (docs/architecture.md, 'Conventions'): max-abs error
// against a tolerance relative to the reference's largest magnitude, with the first offending
// element in the message.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

namespace scaffold::model::test {

inline ::testing::AssertionResult tensors_close(const at::Tensor& actual,
                                                const at::Tensor& expected, double rel_tol,
                                                const std::string& what) {
  if (!actual.defined() || !expected.defined()) {
    return ::testing::AssertionFailure() << what << ": actual defined " << actual.defined()
                                         << ", expected defined " << expected.defined();
  }
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << what << ": shape " << actual.sizes() << " vs expected " << expected.sizes();
  }
  const at::Tensor a = actual.detach().to(at::kDouble).flatten();
  const at::Tensor e = expected.detach().to(at::kDouble).flatten();
  const at::Tensor diff = (a - e).abs();
  const double max_abs = diff.max().item<double>();
  const double scale = std::max(e.abs().max().item<double>(), 1e-30);
  const double tol = rel_tol * scale;
  if (max_abs <= tol) return ::testing::AssertionSuccess();
  const int64_t i = diff.argmax().item<int64_t>();
  return ::testing::AssertionFailure()
         << what << ": max-abs error " << max_abs << " > tolerance " << tol << " (" << rel_tol
         << " x max |expected| " << scale << "); first worst element [" << i
         << "] = " << a[i].item<double>() << ", expected " << e[i].item<double>();
}

// Each element of `actual` within one bf16 step of `expected` (2^-7 of the expected value's
// magnitude, the spacing of bf16 values near it): two roundings to bf16 of sums that differ in
// their last float32 bits land on the same or neighbouring bf16 values, never further apart.
inline ::testing::AssertionResult within_a_bf16_step(const at::Tensor& actual,
                                                     const at::Tensor& expected,
                                                     const std::string& what) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << what << ": shape " << actual.sizes() << " vs expected " << expected.sizes();
  }
  const at::Tensor a = actual.detach().to(at::kDouble), e = expected.detach().to(at::kDouble);
  const at::Tensor excess = (a - e).abs() - e.abs() * (1.0 / 128);
  const int64_t far = (excess > 1e-30).sum().item<int64_t>();
  if (far == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << far << " element(s) more than a bf16 step away (worst by "
         << excess.max().item<double>() << ")";
}

}  // namespace scaffold::model::test
