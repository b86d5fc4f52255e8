// NVTX ranges through the header-only nvtx3 API. Without a tool attached (nsys, ncu) the calls
// return at once; with one they show scaffold's regions on the CPU timeline.
#include <nvtx3/nvToolsExt.h>

#include "profile/nvtx.hpp"

namespace scaffold::profile::detail {

bool nvtx_compiled_in() noexcept {
  return true;
}
void nvtx_range_push(const char* name) noexcept {
  nvtxRangePushA(name);
}
void nvtx_range_pop() noexcept {
  nvtxRangePop();
}

}  // namespace scaffold::profile::detail
