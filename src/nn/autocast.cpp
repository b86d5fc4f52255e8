// The one place that calls LibTorch's autocast TLS functions. LibTorch 2.4 replaced the per-device
// functions (is_cpu_enabled, get_autocast_gpu_dtype, ...) by ones taking a device type and marked
// the old ones deprecated, which -Werror turns into a build failure, hence the version switch.
#include "nn/autocast.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SCAFFOLD_AUTOCAST_DEVICE_API 1
#else
#define SCAFFOLD_AUTOCAST_DEVICE_API 0
#endif

namespace scaffold::nn {

AutocastState AutocastState::current() {
  AutocastState s;
#if SCAFFOLD_AUTOCAST_DEVICE_API
  s.cpu_enabled = at::autocast::is_autocast_enabled(at::kCPU);
  s.cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  s.cuda_enabled = at::autocast::is_autocast_enabled(at::kCUDA);
  s.cuda_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
#else
  s.cpu_enabled = at::autocast::is_cpu_enabled();
  s.cpu_dtype = at::autocast::get_autocast_cpu_dtype();
  s.cuda_enabled = at::autocast::is_enabled();
  s.cuda_dtype = at::autocast::get_autocast_gpu_dtype();
#endif
  s.cache_enabled = at::autocast::is_autocast_cache_enabled();
  return s;
}

AutocastState AutocastState::disabled() const {
  AutocastState s = *this;
  s.cpu_enabled = false;
  s.cuda_enabled = false;
  return s;
}

namespace {

void apply(const AutocastState& s) {
#if SCAFFOLD_AUTOCAST_DEVICE_API
  at::autocast::set_autocast_dtype(at::kCPU, s.cpu_dtype);
  at::autocast::set_autocast_enabled(at::kCPU, s.cpu_enabled);
  at::autocast::set_autocast_dtype(at::kCUDA, s.cuda_dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, s.cuda_enabled);
#else
  at::autocast::set_autocast_cpu_dtype(s.cpu_dtype);
  at::autocast::set_cpu_enabled(s.cpu_enabled);
  at::autocast::set_autocast_gpu_dtype(s.cuda_dtype);
  at::autocast::set_enabled(s.cuda_enabled);
#endif
  at::autocast::set_autocast_cache_enabled(s.cache_enabled);
}

}  // namespace

AutocastGuard::AutocastGuard(const AutocastState& state) : previous_(AutocastState::current()) {
  apply(state);
}

AutocastGuard::~AutocastGuard() {
  apply(previous_);
}

}  // namespace scaffold::nn
