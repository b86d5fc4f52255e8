// Bit-exact tensor comparison for the trainer and checkpoint tests (docs/architecture.md,
// tolerance 0): on a mismatch the message gives the max-abs error, how many elements differ and
// the first one.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

namespace scaffold::test {

inline ::testing::AssertionResult identical(const at::Tensor& actual, const at::Tensor& expected,
                                            const std::string& what) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure()
           << what << ": defined " << actual.defined() << " vs expected " << expected.defined();
  if (actual.sizes() != expected.sizes() || actual.scalar_type() != expected.scalar_type())
    return ::testing::AssertionFailure()
           << what << ": " << actual.sizes() << " " << actual.scalar_type() << " vs expected "
           << expected.sizes() << " " << expected.scalar_type();
  if (at::equal(actual, expected)) return ::testing::AssertionSuccess();
  const at::Tensor a = actual.detach().to(at::kDouble).flatten();
  const at::Tensor e = expected.detach().to(at::kDouble).flatten();
  const at::Tensor diff = (a - e).abs();
  const int64_t differing = a.ne(e).sum().item<int64_t>();
  const int64_t i = a.ne(e).nonzero()[0][0].item<int64_t>();
  return ::testing::AssertionFailure()
         << what << ": max-abs error " << diff.max().item<double>() << " > tolerance " << 0.0
         << " (" << differing << " of " << a.numel() << " elements differ); first [" << i
         << "] = " << a[i].item<double>() << ", expected " << e[i].item<double>();
}

}  // namespace scaffold::test
