// Makes kernels::cpu_has_bf16_products() answer `has` (1 or 0) while the object lives (set()
// changes the answer), then CPUID's answer again: for tests that run both the bf16-products path
// and the float32 detour on any CPU.
#pragma once

#include "kernels/dnnl_linear.hpp"

namespace scaffold::model::test {

class ForcedBf16Products {
 public:
  explicit ForcedBf16Products(int has) { set(has); }
  ~ForcedBf16Products() { kernels::force_bf16_products(-1); }
  ForcedBf16Products(const ForcedBf16Products&) = delete;
  ForcedBf16Products& operator=(const ForcedBf16Products&) = delete;

  void set(int has) const { kernels::force_bf16_products(has); }
};

}  // namespace scaffold::model::test
