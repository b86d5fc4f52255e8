// One named registry of the process's communication counters: each communicating module (halo
// exchanges, all-to-alls, tensor-parallel collectives, pipeline transfers, the FNO's distributed
// FFT) adds what it did under its own name, and whoever reports reads by name or takes all of
// them. The training loop takes every counter's seconds over its timed steps
// (train::CommTimes::counter_s), so it knows no module by name. Thread-safe; torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace scaffold::dist {

struct CommCounter {
  int64_t calls = 0;     // operations (exchanges, collectives, messages)
  int64_t bytes = 0;     // bytes sent
  double seconds = 0.0;  // time spent in them (or waiting for them)
};

// The names the modules count under.
inline constexpr const char* kCommHalo = "halo";
inline constexpr const char* kCommAllToAll = "all_to_all";
inline constexpr const char* kCommTensorParallel = "tensor_parallel";
inline constexpr const char* kCommPipeline = "pipeline";
inline constexpr const char* kCommDistFftAllToAll = "dist_fft_all_to_all";
inline constexpr const char* kCommDistFftAllReduce = "dist_fft_all_reduce";

// Adds to counter `name` (created at zero on first use).
void count_comm(const std::string& name, int64_t calls, int64_t bytes, double seconds);

// Counter `name`; zeros when nothing was counted under it.
CommCounter comm_counter(const std::string& name);

// Every counter, by name.
std::map<std::string, CommCounter> comm_counters();

}  // namespace scaffold::dist
