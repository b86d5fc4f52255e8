// LibTorch's operator-level events in the same Chrome trace as scaffold's regions: LibTorch 1.13's
// C++ profiler (torch::autograd::profiler, the one under torch.profiler) is started when the
// Active window opens and stopped when it closes; its events are moved onto the trace's clock and
// merged with Profiler::add_external_events. This header has no LibTorch in it; the library
// scaffold_profile_torch links it.
#pragma once

#include "profile/options.hpp"
#include "profile/profiler.hpp"

namespace scaffold::profile {

// Hooks LibTorch's profiler to `profiler`'s phases: prepared in Warmup, started in Active, stopped
// and merged at Done (the window's end, finish() or write_chrome_trace()), all on the thread that
// calls step(), which must be the thread that runs the model. CPU operators always; CUDA kernels,
// memcpys and runtime calls as well when CUDA is available and LibTorch was built with Kineto.
// options.record_shapes adds each operator's input shapes. Nothing happens for a disabled
// profiler. A LibTorch profiler failure is logged as a warning; the regions' trace is unaffected.
void record_torch_operators(Profiler& profiler, const ProfileOptions& options);

}  // namespace scaffold::profile
