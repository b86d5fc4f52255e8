#include "profile/profiler.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <new>

#include "core/fs.hpp"
#include "core/log.hpp"
#include "profile/nvtx.hpp"

namespace scaffold::profile {

const char* phase_name(ProfilePhase phase) {
  switch (phase) {
    case ProfilePhase::Off:
      return "off";
    case ProfilePhase::Setup:
      return "setup";
    case ProfilePhase::Wait:
      return "wait";
    case ProfilePhase::Warmup:
      return "warmup";
    case ProfilePhase::Active:
      return "active";
    case ProfilePhase::Done:
      return "done";
  }
  return "?";
}

ProfilePhase schedule_phase(const ProfileSchedule& schedule, int64_t batch) {
  if (batch < schedule.wait) return ProfilePhase::Wait;
  if (batch < schedule.wait + schedule.warmup) return ProfilePhase::Warmup;
  if (batch < schedule.wait + schedule.warmup + schedule.active) return ProfilePhase::Active;
  return ProfilePhase::Done;
}

// Regions are few (about ten per batch) and coarse, so one mutex-guarded vector is plenty; a
// region stores its name pointer, not a copy, so recording allocates only when the vector grows.
struct Profiler::Buffer {
  struct Region {
    const char* name;
    int64_t tid;
    int64_t begin_ns;  // steady clock
    int64_t end_ns;
  };
  mutable std::mutex mutex;
  std::vector<Region> regions;
  std::vector<TraceEvent> external;
  std::map<int64_t, std::string> thread_names;
  std::vector<PhaseListener> listeners;
  int64_t dropped = 0;  // regions lost to a failed allocation
};

int64_t Profiler::steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Profiler::Profiler(bool enabled, const ProfileSchedule& schedule)
    : enabled_(enabled),
      schedule_(schedule),
      origin_ns_(steady_ns()),
      buffer_(std::make_unique<Buffer>()) {
  phase_.store(enabled ? ProfilePhase::Setup : ProfilePhase::Off);
  recording_.store(enabled);
}

Profiler::~Profiler() {
  try {
    finish();
  } catch (const std::exception& e) {
    LOG_WARN("profiler: stopping at exit failed: {}", e.what());
  }
}

void Profiler::set_phase(ProfilePhase phase) {
  const ProfilePhase old = phase_.exchange(phase);
  recording_.store(phase == ProfilePhase::Setup || phase == ProfilePhase::Active,
                   std::memory_order_relaxed);
  if (old == phase) return;
  std::vector<PhaseListener> listeners;
  {
    const std::lock_guard<std::mutex> lock(buffer_->mutex);
    listeners = buffer_->listeners;
  }
  // Called without the lock: a listener may add events.
  for (const PhaseListener& listener : listeners) listener(*this, phase);
}

void Profiler::step() {
  if (!enabled_) return;
  ++steps_;
  if (phase() == ProfilePhase::Done) return;
  set_phase(schedule_phase(schedule_, steps_ - 1));
}

void Profiler::finish() {
  if (!enabled_ || phase() == ProfilePhase::Done) return;
  set_phase(ProfilePhase::Done);
}

void Profiler::add_phase_listener(PhaseListener listener) {
  const std::lock_guard<std::mutex> lock(buffer_->mutex);
  buffer_->listeners.push_back(std::move(listener));
}

int64_t Profiler::current_thread_id() {
  thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

void Profiler::name_thread(int64_t tid, std::string name) {
  const std::lock_guard<std::mutex> lock(buffer_->mutex);
  buffer_->thread_names[tid] = std::move(name);
}

double Profiler::to_trace_us(std::chrono::steady_clock::time_point t) const {
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return static_cast<double>(ns - origin_ns_) / 1000.0;
}

void Profiler::add_external_events(std::vector<TraceEvent> events) {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(buffer_->mutex);
  auto& external = buffer_->external;
  external.insert(external.end(), std::make_move_iterator(events.begin()),
                  std::make_move_iterator(events.end()));
}

void Profiler::record_region(const char* name, int64_t begin_ns, int64_t end_ns) noexcept {
  const int64_t tid = current_thread_id();
  const std::lock_guard<std::mutex> lock(buffer_->mutex);
  try {
    buffer_->regions.push_back({name, tid, begin_ns, end_ns});
  } catch (const std::bad_alloc&) {
    ++buffer_->dropped;  // a region is not worth aborting a training run for
  }
}

std::vector<TraceEvent> Profiler::events() const {
  std::vector<TraceEvent> out;
  {
    const std::lock_guard<std::mutex> lock(buffer_->mutex);
    out.reserve(buffer_->regions.size() + buffer_->external.size());
    for (const Buffer::Region& r : buffer_->regions) {
      TraceEvent event;
      event.name = r.name;
      event.ts_us = static_cast<double>(r.begin_ns - origin_ns_) / 1000.0;
      event.dur_us = static_cast<double>(r.end_ns - r.begin_ns) / 1000.0;
      event.tid = r.tid;
      out.push_back(std::move(event));
    }
    out.insert(out.end(), buffer_->external.begin(), buffer_->external.end());
  }
  // Parents before children when they begin together, so viewers nest them.
  std::stable_sort(out.begin(), out.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.ts_us != b.ts_us ? a.ts_us < b.ts_us : a.dur_us > b.dur_us;
  });
  return out;
}

bool Profiler::write_chrome_trace(const std::filesystem::path& path, const TraceInfo& info) {
  if (!enabled_) return false;
  finish();
  const std::vector<TraceEvent> all = events();
  std::vector<std::pair<int64_t, std::string>> thread_names;
  TraceInfo full = info;
  {
    const std::lock_guard<std::mutex> lock(buffer_->mutex);
    thread_names.assign(buffer_->thread_names.begin(), buffer_->thread_names.end());
    if (buffer_->dropped > 0)
      full.other_data.emplace_back("dropped_regions", std::to_string(buffer_->dropped));
  }
  const int64_t main_tid = static_cast<int64_t>(::getpid());
  const bool main_named = std::any_of(thread_names.begin(), thread_names.end(),
                                      [&](const auto& entry) { return entry.first == main_tid; });
  if (!main_named) thread_names.emplace_back(main_tid, "main");
  full.other_data.emplace_back("schedule_wait", std::to_string(schedule_.wait));
  full.other_data.emplace_back("schedule_warmup", std::to_string(schedule_.warmup));
  full.other_data.emplace_back("schedule_active", std::to_string(schedule_.active));
  full.other_data.emplace_back("steps", std::to_string(steps_));
  full.other_data.emplace_back("clock", "steady clock, microseconds since the profiler started");
  full.other_data.emplace_back("nvtx", detail::nvtx_compiled_in() ? "on" : "off");
  core::write_file_atomic(path, chrome_trace_json(all, thread_names, full));
  return true;
}

bool Profiler::export_chrome_trace(const std::filesystem::path& path,
                                   const TraceInfo& info) noexcept {
  try {
    if (!write_chrome_trace(path, info)) return false;
    LOG_INFO("profiler: Chrome trace written to {}", path.string());
    return true;
  } catch (const std::exception& e) {
    LOG_WARN("profiler: could not write the Chrome trace {}: {}", path.string(), e.what());
    return false;
  }
}

void ScopedRegion::open(Profiler* profiler, const char* name) noexcept {
  profiler_ = profiler;
  name_ = name;
  detail::nvtx_range_push(name);
  begin_ns_ = Profiler::steady_ns();  // after the push: NVTX's cost stays outside the region
}

void ScopedRegion::close() noexcept {
  const int64_t end_ns = Profiler::steady_ns();
  detail::nvtx_range_pop();
  profiler_->record_region(name_, begin_ns_, end_ns);
}

}  // namespace scaffold::profile
