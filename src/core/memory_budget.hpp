// What a run will at least hold in memory, checked against what the machine has before anything
// is allocated or written. Each workload lists the large items its configuration implies (the
// bytes, and the config keys that set them); check_memory_budget refuses a run whose items add
// up to more than the memory available to one rank, naming the largest items and their keys.
// The items are lower bounds (the tensors the run certainly holds at once), so a refusal is
// certain: a run it lets through may still need more. Arithmetic is in double, so absurd sizes
// (a 10^12-token sequence) give a large number, never an overflow. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scaffold::core {

struct MemoryItem {
  std::string what;               // "the causal mask (seq_length^2 booleans)"
  double bytes = 0.0;             // >= 0; may be huge or inf for absurd sizes
  std::vector<std::string> keys;  // the config keys that set its size
};

struct MemoryEstimate {
  std::vector<MemoryItem> items;
  void add(std::string what, double bytes, std::vector<std::string> keys);
  double total_bytes() const;  // inf when an item is inf or the sum overflows
};

// Memory one rank may use: the smaller of the host's MemAvailable (/proc/meminfo) and the
// cgroup's memory.max minus its usage (v2, else v1), each divided by `ranks_per_node`, and the
// process's RLIMIT_AS when set. nullopt when none of them can be read.
std::optional<double> host_memory_per_rank_bytes(int ranks_per_node);

// Throws core::Error when estimate.total_bytes() exceeds `available_bytes`, e.g.
//   "llm_training: this configuration needs at least 1.8 TiB per rank, more than the 22.1 GiB
//    available on cpu; the largest items: the causal mask (seq_length^2 booleans) 931.3 GiB
//    (seq_length), ...; reduce those keys".
// `workload` prefixes the message; `where` names the memory ("cpu", "cuda:0 (NVIDIA H200)").
void check_memory_budget(const std::string& workload, const MemoryEstimate& estimate,
                         double available_bytes, const std::string& where);

}  // namespace scaffold::core
