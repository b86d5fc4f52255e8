#include "core/memory_budget.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "core/resources.hpp"

namespace scaffold::core {

void MemoryEstimate::add(std::string what, double bytes, std::vector<std::string> keys) {
  items.push_back({std::move(what), std::isnan(bytes) || bytes < 0 ? 0.0 : bytes, std::move(keys)});
}

double MemoryEstimate::total_bytes() const {
  double sum = 0.0;
  for (const MemoryItem& i : items) sum += i.bytes;
  return sum;
}

namespace {

// The first number after `label` in /proc/meminfo (kB), in bytes.
std::optional<double> meminfo_bytes(const std::string& label) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(label, 0) != 0) continue;
    std::istringstream fields(line.substr(label.size()));
    double kib = 0.0;
    if (fields >> kib) return kib * 1024.0;
  }
  return std::nullopt;
}

// A cgroup file holding one number ("max" reads as no limit).
std::optional<double> cgroup_number(const std::string& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    const double v = std::stod(word);
    // cgroup v1 reports "no limit" as a number near 2^63.
    return v > 1e18 ? std::nullopt : std::optional<double>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> cgroup_free_bytes() {
  for (const auto& [limit, usage] :
       {std::pair<std::string, std::string>{"/sys/fs/cgroup/memory.max",
                                            "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::optional<double> l = cgroup_number(limit);
    if (!l) continue;
    return std::max(0.0, *l - cgroup_number(usage).value_or(0.0));
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> host_memory_per_rank_bytes(int ranks_per_node) {
  const double ranks = std::max(1, ranks_per_node);
  std::optional<double> shared = meminfo_bytes("MemAvailable:");
  if (const std::optional<double> cg = cgroup_free_bytes())
    shared = shared ? std::min(*shared, *cg) : *cg;
  std::optional<double> out;
  if (shared) out = *shared / ranks;
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const auto limit = static_cast<double>(as.rlim_cur);
    out = out ? std::min(*out, limit) : limit;
  }
  return out;
}

void check_memory_budget(const std::string& workload, const MemoryEstimate& estimate,
                         double available_bytes, const std::string& where) {
  const double total = estimate.total_bytes();
  if (total <= available_bytes) return;
  std::vector<const MemoryItem*> largest;
  for (const MemoryItem& i : estimate.items) largest.push_back(&i);
  std::stable_sort(largest.begin(), largest.end(),
                   [](const MemoryItem* a, const MemoryItem* b) { return a->bytes > b->bytes; });
  std::string items, keys;
  std::vector<std::string> seen;
  for (std::size_t n = 0; n < largest.size() && n < 3; ++n) {
    const MemoryItem& i = *largest[n];
    if (i.bytes < 0.01 * total) break;  // the big ones only
    std::string its_keys;
    for (const std::string& k : i.keys) {
      its_keys += (its_keys.empty() ? "" : ", ") + k;
      if (std::find(seen.begin(), seen.end(), k) == seen.end()) {
        seen.push_back(k);
        keys += (keys.empty() ? "" : ", ") + k;
      }
    }
    items += fmt::format("{}{} {}{}", items.empty() ? "" : "; ", i.what, human_bytes(i.bytes),
                         its_keys.empty() ? "" : " (" + its_keys + ")");
  }
  throw Error(fmt::format(
      "{}: this configuration needs at least {} per rank, more than the {} available on {}; "
      "the largest items: {}; reduce {}",
      workload, human_bytes(total), human_bytes(available_bytes), where, items,
      keys.empty() ? "the sizes" : keys));
}

}  // namespace scaffold::core
