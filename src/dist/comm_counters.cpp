#include "dist/comm_counters.hpp"

#include <mutex>

namespace scaffold::dist {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, CommCounter>& registry() {
  static std::map<std::string, CommCounter> counters;
  return counters;
}

}  // namespace

void count_comm(const std::string& name, int64_t calls, int64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  CommCounter& c = registry()[name];
  c.calls += calls;
  c.bytes += bytes;
  c.seconds += seconds;
}

CommCounter comm_counter(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = registry().find(name);
  return it == registry().end() ? CommCounter{} : it->second;
}

std::map<std::string, CommCounter> comm_counters() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return registry();
}

}  // namespace scaffold::dist
