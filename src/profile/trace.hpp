// Chrome trace events and their JSON text (the "Trace Event Format" that chrome://tracing and
// Perfetto open): complete events ("ph": "X") plus process/thread name metadata ("ph": "M").
// Also the trace's file name in the run folder (docs/profiling.md). Stateless: the Profiler
// owns the events.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace scaffold::profile {

// One complete event. Times are microseconds on the profiler's clock (Profiler::to_trace_us:
// steady clock, 0 at the profiler's construction), fractional so nanoseconds survive.
struct TraceEvent {
  std::string name;
  std::string category = "scaffold";  // "cat": scaffold regions; e.g. "cpu_op" for LibTorch's
  double ts_us = 0.0;                 // begin
  double dur_us = 0.0;
  int64_t tid = 0;  // OS thread id, or a synthetic track id (name it with Profiler::name_thread)
  std::vector<std::pair<std::string, std::string>> args;  // shown in Perfetto's details pane
};

// What the trace says about the process that wrote it.
struct TraceInfo {
  std::string process_name = "scaffold";                        // e.g. "scaffold rank 0 (host)"
  int64_t pid = 0;                                              // 0: this process's id
  std::vector<std::pair<std::string, std::string>> other_data;  // run context: host, rank, ...
};

// The trace as a JSON object: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
// Events are written in the order given, one per line; `thread_names` become thread_name
// metadata events. otherData gets info.other_data plus "generator" (scaffold's version).
std::string chrome_trace_json(const std::vector<TraceEvent>& events,
                              const std::vector<std::pair<int64_t, std::string>>& thread_names,
                              const TraceInfo& info);

// The values ScaFFold's trace file name is made of.
struct TraceFileNameParts {
  std::string host;
  int rank = 0;
  int nodes = 1;
  int world_size = 1;
  int problem_scale = 0;
  int epochs = 0;
  int n_instances_used_per_fractal = 0;
  int64_t unix_time_s = 0;  // int(time.time()) when the trace is written
};

// `torch-<host>-r<rank>-N<nodes>-n<world>-ps<scale>-e<epochs>-nipf<n>-<unixtime>.json`; a '/' in
// the host name becomes '_' so the name stays one path component.
std::string trace_file_name(const TraceFileNameParts& parts);

}  // namespace scaffold::profile
