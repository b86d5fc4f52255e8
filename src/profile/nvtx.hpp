// NVTX ranges for the profiler's regions, so Nsight Systems shows the same names as the Chrome
// trace. nvtx_cuda.cpp (CUDA LibTorch builds, header-only nvtx3) calls NVTX; nvtx_none.cpp is
// the no-op every other build gets. Internal to the profile library.
#pragma once

namespace scaffold::profile::detail {

bool nvtx_compiled_in() noexcept;
void nvtx_range_push(const char* name) noexcept;  // a range on the calling thread's stack
void nvtx_range_pop() noexcept;

}  // namespace scaffold::profile::detail
