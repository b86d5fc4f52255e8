#include "profile/torch_ops.hpp"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <chrono>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/log.hpp"

namespace scaffold::profile {
namespace {

namespace tap = torch::autograd::profiler;
namespace tpi = torch::profiler::impl;

// Synthetic track ids, far above any Linux thread id (pid_max <= 2^22).
constexpr int64_t kTorchThreadTrackBase = 1'000'000'000;  // + LibTorch's own thread number
constexpr int64_t kGpuTrackBase = 2'000'000'000;          // + device * 100000 + stream

// libkineto::ActivityType's values (libkineto/include/ActivityType.h), which KinetoEvent hands
// out as a plain number; without Kineto every event is 0, a CPU operator.
const char* activity_category(uint8_t activity) {
  static const char* const kNames[] = {
      "cpu_op",     "user_annotation", "gpu_user_annotation",  "gpu_memcpy",
      "gpu_memset", "kernel",          "external_correlation", "cuda_runtime"};
  return activity < std::size(kNames) ? kNames[activity] : "torch";
}

std::string join_shapes(const c10::ArrayRef<std::vector<int64_t>> shapes) {
  std::string out = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) out += ", ";
    out += "[";
    for (std::size_t j = 0; j < shapes[i].size(); ++j)
      out += (j > 0 ? ", " : "") + std::to_string(shapes[i][j]);
    out += "]";
  }
  return out + "]";
}

class TorchOperatorRecorder {
 public:
  explicit TorchOperatorRecorder(const ProfileOptions& options)
      : config_(tpi::ProfilerState::KINETO, options.record_shapes, /*profile_memory=*/false,
                options.with_stack) {
    activities_.insert(tpi::ActivityType::CPU);
    if (torch::cuda::is_available()) activities_.insert(tpi::ActivityType::CUDA);
  }

  void on_phase(Profiler& profiler, ProfilePhase phase) {
    try {
      if (phase == ProfilePhase::Warmup && !running_) {
        tap::prepareProfiler(config_, activities_);
      } else if (phase == ProfilePhase::Active && !running_ && !failed_) {
        start();
      } else if (phase == ProfilePhase::Done && running_) {
        stop(profiler);
      }
    } catch (const std::exception& e) {
      failed_ = true;
      running_ = false;
      LOG_WARN(
          "profiler: LibTorch's operator profiler failed, the trace keeps only scaffold's "
          "regions: {}",
          e.what());
    }
  }

 private:
  void start() {
    try {
      tap::enableProfiler(config_, activities_);
    } catch (const c10::Error& e) {
      if (activities_.size() == 1) throw;
      // A LibTorch without Kineto/CUPTI refuses CUDA activities: keep the CPU operators.
      LOG_WARN("profiler: LibTorch cannot trace CUDA kernels here, recording CPU operators only");
      activities_ = {tpi::ActivityType::CPU};
      tap::enableProfiler(config_, activities_);
    }
    running_ = true;
    main_torch_tid_ = at::RecordFunction::currentThreadId();
    main_os_tid_ = Profiler::current_thread_id();
  }

  void stop(Profiler& profiler) {
    running_ = false;
    const std::unique_ptr<tap::ProfilerResult> result = tap::disableProfiler();
    // LibTorch stamps events with CLOCK_REALTIME microseconds; the trace runs on the steady clock.
    // A paired reading of both clocks maps one onto the other (drift over a run is negligible).
    // A thread preempted between the two readings would skew the offset by the pause, so take the
    // pair bracketed most tightly by two steady readings out of a few tries.
    double offset_us = 0.0;
    double best_bracket_us = std::numeric_limits<double>::infinity();
    for (int attempt = 0; attempt < 8; ++attempt) {
      const double before_us = profiler.now_trace_us();
      const double realtime_us =
          static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count()) /
          1000.0;
      const double after_us = profiler.now_trace_us();
      if (after_us - before_us < best_bracket_us) {
        best_bracket_us = after_us - before_us;
        offset_us = 0.5 * (before_us + after_us) - realtime_us;
      }
    }

    std::vector<TraceEvent> events;
    std::set<int64_t> torch_threads;
    std::set<std::pair<int, int64_t>> gpu_streams;
    events.reserve(result->events().size());
    for (const tap::KinetoEvent& e : result->events()) {
      TraceEvent event;
      event.name = e.name();
      event.category = activity_category(e.activityType());
      event.ts_us = static_cast<double>(e.startUs()) + offset_us;
      event.dur_us = static_cast<double>(e.durationUs());
      if (e.deviceType() == c10::DeviceType::CUDA) {
        const int device = e.deviceIndex();
        event.tid = kGpuTrackBase + int64_t{device} * 100000 + e.deviceResourceId();
        gpu_streams.emplace(device, e.deviceResourceId());
      } else if (e.deviceResourceId() != 0) {
        event.tid = e.deviceResourceId();  // Kineto's system thread id
      } else if (e.startThreadId() == main_torch_tid_) {
        event.tid = main_os_tid_;
      } else {
        event.tid = kTorchThreadTrackBase + static_cast<int64_t>(e.startThreadId());
        torch_threads.insert(static_cast<int64_t>(e.startThreadId()));
      }
      if (e.hasShapes() && !e.shapes().empty())
        event.args.emplace_back("Input Dims", join_shapes(e.shapes()));
      if (e.hasStack() && !e.stack().empty()) {
        std::string stack;
        for (const std::string& frame : e.stack()) stack += (stack.empty() ? "" : "; ") + frame;
        event.args.emplace_back("Call stack", std::move(stack));
      }
      events.push_back(std::move(event));
    }
    for (const int64_t id : torch_threads)
      profiler.name_thread(kTorchThreadTrackBase + id, "LibTorch thread " + std::to_string(id));
    for (const auto& [device, stream] : gpu_streams)
      profiler.name_thread(kGpuTrackBase + int64_t{device} * 100000 + stream,
                           "GPU " + std::to_string(device) + " stream " + std::to_string(stream));
    LOG_DEBUG("profiler: merged {} LibTorch events", events.size());
    profiler.add_external_events(std::move(events));
  }

  tpi::ProfilerConfig config_;
  std::set<tpi::ActivityType> activities_;
  bool running_ = false;
  bool failed_ = false;
  uint64_t main_torch_tid_ = 0;  // LibTorch's number for the thread that started the profiler
  int64_t main_os_tid_ = 0;
};

}  // namespace

void record_torch_operators(Profiler& profiler, const ProfileOptions& options) {
  if (!profiler.enabled()) return;
  auto recorder = std::make_shared<TorchOperatorRecorder>(options);
  profiler.add_phase_listener(
      [recorder](Profiler& p, ProfilePhase phase) { recorder->on_phase(p, phase); });
  // Attached late (already inside the window): start now.
  if (profiler.phase() == ProfilePhase::Active) recorder->on_phase(profiler, ProfilePhase::Active);
}

}  // namespace scaffold::profile
