// python_float_str must spell floats exactly as Python's str(float) (library folder names).
#include <gtest/gtest.h>

#include "core/pyfloat.hpp"

namespace scaffold::core {
namespace {

TEST(PythonFloatStr, MatchesPythonRepr) {
  // Expected strings are what CPython 3 prints for str(x).
  const std::pair<double, const char*> cases[] = {{0.15, "0.15"},
                                                  {0.1, "0.1"},
                                                  {1.0, "1.0"},
                                                  {0.0, "0.0"},
                                                  {-2.5, "-2.5"},
                                                  {1e-05, "1e-05"},
                                                  {0.0001, "0.0001"},
                                                  {1e16, "1e+16"},
                                                  {123456.0, "123456.0"},
                                                  {1e15, "1000000000000000.0"},
                                                  {0.1 + 0.2, "0.30000000000000004"},
                                                  {1.5e-10, "1.5e-10"},
                                                  {2.0 / 3.0, "0.6666666666666666"}};
  for (const auto& [value, expected] : cases) EXPECT_EQ(python_float_str(value), expected);
}

}  // namespace
}  // namespace scaffold::core
