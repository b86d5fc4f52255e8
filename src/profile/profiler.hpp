// Named regions and the step schedule of the Chrome trace (docs/profiling.md). One Profiler per
// process; the caller decides whether this rank profiles. A ScopedRegion costs one predictable
// branch when the profiler is off or between recording windows (no clock read, no allocation, no
// lock); when recording it reads the steady clock twice, takes a mutex once and pushes an NVTX
// range (CUDA builds). Operator-level events come from elsewhere (profile/torch_ops.hpp) through
// add_external_events(); this library knows nothing of LibTorch.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "profile/options.hpp"
#include "profile/trace.hpp"

namespace scaffold::profile {

// Where the profiler is. Regions record in Setup and Active only.
enum class ProfilePhase {
  Off,     // the profiler is disabled: nothing ever records
  Setup,   // from construction to the first step(): init, dataset, model, warm-up (records)
  Wait,    // training batches [0, wait)
  Warmup,  // training batches [wait, wait + warmup)
  Active,  // training batches [wait + warmup, wait + warmup + active) (records)
  Done,    // after the active window, or after finish(): nothing records any more (repeat=1)
};

const char* phase_name(ProfilePhase phase);
// The phase of 0-based training batch `batch` under `schedule`: Wait, Warmup, Active or Done.
ProfilePhase schedule_phase(const ProfileSchedule& schedule, int64_t batch);

// The code regions ScaFFold annotates (docs/profiling.md), in the order a run meets them.
inline constexpr std::array<const char*, 17> kSpecRegionNames = {
    "init_ddp",   "get_dataset",     "init_model",     "cleanup_or_resume",  "warmup",
    "train",      "batch_loop",      "minibatch_time", "run_training_batch", "image_to_device",
    "predict",    "calculate_loss",  "backward",       "step_and_update",    "update_loss",
    "checkpoint", "generate_figures"};

class Profiler {
 public:
  // Called on the thread that calls step()/finish(), after each phase change (LibTorch's
  // profiler is started and stopped this way).
  using PhaseListener = std::function<void(Profiler& profiler, ProfilePhase phase)>;

  // `enabled`: profiling is on and this rank profiles (profiles_this_rank()). A disabled profiler
  // stays in phase Off, records nothing and writes nothing.
  explicit Profiler(bool enabled, const ProfileSchedule& schedule = {});
  // Calls finish(), so listeners see Done even when the trace is never written.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  bool enabled() const { return enabled_; }
  // Whether a region opened now records; safe to call from any thread.
  bool recording() const noexcept { return recording_.load(std::memory_order_relaxed); }
  ProfilePhase phase() const { return phase_.load(std::memory_order_relaxed); }
  const ProfileSchedule& schedule() const { return schedule_; }
  int64_t steps() const { return steps_; }  // step() calls so far

  // Call once per training batch, at its start (before the batch's first region): the n-th
  // call (1-based) enters batch n-1 and moves the phase to schedule_phase(batch n-1). Work before
  // the first call is Setup. Once Done, stays Done. Call from one thread only.
  void step();
  // Ends recording for good (phase Done); idempotent. write_chrome_trace() calls it.
  void finish();
  void add_phase_listener(PhaseListener listener);

  // The OS id of the calling thread (gettid), as regions record it.
  static int64_t current_thread_id();
  // Names a thread or synthetic track in the trace (thread_name metadata). The thread whose id is
  // the process id is called "main" unless named otherwise.
  void name_thread(int64_t tid, std::string name);

  // Microseconds on the trace's clock: steady clock, 0 at construction.
  double to_trace_us(std::chrono::steady_clock::time_point t) const;
  double now_trace_us() const { return to_trace_us(std::chrono::steady_clock::now()); }

  // Merges events recorded elsewhere (e.g. LibTorch's operators), times on the trace's clock.
  // Ignored when the profiler is disabled.
  void add_external_events(std::vector<TraceEvent> events);

  // Everything recorded so far, regions and external events, sorted by begin time (outer region
  // first on ties). A region appears once it has closed.
  std::vector<TraceEvent> events() const;

  // Calls finish(), then writes the Chrome trace to `path` atomically. Returns false (and writes
  // nothing) when the profiler is disabled; throws core::FileError when the write fails.
  bool write_chrome_trace(const std::filesystem::path& path, const TraceInfo& info = {});
  // write_chrome_trace() that logs where the trace went, or the failure as a warning, and
  // carries on (as ScaFFold: export failures are logged and the run continues).
  bool export_chrome_trace(const std::filesystem::path& path, const TraceInfo& info = {}) noexcept;

 private:
  friend class ScopedRegion;
  struct Buffer;

  static int64_t steady_ns() noexcept;
  void record_region(const char* name, int64_t begin_ns, int64_t end_ns) noexcept;
  void set_phase(ProfilePhase phase);

  const bool enabled_;
  const ProfileSchedule schedule_;
  const int64_t origin_ns_;  // steady clock at construction
  std::atomic<bool> recording_{false};
  std::atomic<ProfilePhase> phase_{ProfilePhase::Off};
  int64_t steps_ = 0;
  std::unique_ptr<Buffer> buffer_;  // records, names, listeners; mutex-guarded
};

// Records [construction, destruction) as region `name` on the calling thread, if the profiler
// records when the region opens; it then records even if the window closes before it does.
// `name` must outlive the profiler (a string literal). Not movable: NVTX ranges are per thread.
class ScopedRegion {
 public:
  ScopedRegion(Profiler* profiler, const char* name) noexcept {
    if (__builtin_expect(profiler != nullptr && profiler->recording(), 0)) open(profiler, name);
  }
  ~ScopedRegion() {
    if (__builtin_expect(profiler_ != nullptr, 0)) close();
  }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;

 private:
  void open(Profiler* profiler, const char* name) noexcept;
  void close() noexcept;

  Profiler* profiler_ = nullptr;  // null: not recording
  const char* name_ = nullptr;
  int64_t begin_ns_ = 0;
};

}  // namespace scaffold::profile

#define SCAFFOLD_PROFILE_CONCAT_INNER(a, b) a##b
#define SCAFFOLD_PROFILE_CONCAT(a, b) SCAFFOLD_PROFILE_CONCAT_INNER(a, b)
// SCAFFOLD_PROFILE_REGION(profiler_ptr, "name"): a region to the end of the enclosing scope.
// `"" name` makes a name that is not a string literal a compile error. A null pointer is allowed.
#define SCAFFOLD_PROFILE_REGION(profiler, name)                                             \
  const ::scaffold::profile::ScopedRegion SCAFFOLD_PROFILE_CONCAT(scaffold_profile_region_, \
                                                                  __LINE__)((profiler), "" name)
