// Facts about this process and host that results record: peak memory, host name, executable.
#pragma once

#include <cstdint>
#include <string>

namespace scaffold::core {

int64_t peak_rss_bytes();  // VmHWM from /proc/self/status; 0 when unavailable
std::string host_name();
std::string executable_path();  // /proc/self/exe, or "" when unavailable

// Whether this CPU has the instructions LibTorch needs to hand bf16 matrix products and
// convolutions to oneDNN: AVX-512 with BW, VL and DQ (LibTorch's own test). Where it has not (an
// AVX2 CPU), LibTorch 1.13 runs them in reference loops (docs/llm.md, "bf16 on a CPU without bf16
// products"). True on CPUs other than x86, whose libraries choose for themselves.
bool cpu_has_bf16_products();

}  // namespace scaffold::core
