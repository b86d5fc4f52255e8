// NVTX stand-in for builds without CUDA: regions still reach the Chrome trace, just not Nsight.
#include "profile/nvtx.hpp"

namespace scaffold::profile::detail {

bool nvtx_compiled_in() noexcept {
  return false;
}
void nvtx_range_push(const char* /*name*/) noexcept {}
void nvtx_range_pop() noexcept {}

}  // namespace scaffold::profile::detail
