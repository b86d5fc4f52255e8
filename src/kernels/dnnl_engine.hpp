// The CPU engine that this library's oneDNN primitives (kernels/dnnl_conv.hpp,
// kernels/bf16_gemm.hpp) are built for and run on: one per process. Include only where
// SCAFFOLD_WITH_DNNL (a build with libdnnl-dev).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace scaffold::kernels {

inline dnnl::engine& dnnl_cpu_engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

}  // namespace scaffold::kernels
