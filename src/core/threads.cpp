#include "core/threads.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace scaffold::core {

namespace {

// OMP_NUM_THREADS as a usable count, or 0.
int omp_num_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr) return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || errno == ERANGE || n < 1 || n > kMaxThreads) return 0;
  return static_cast<int>(n);
}

}  // namespace

std::string omp_num_threads_warning() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr || omp_num_threads() > 0) return "";
  return "OMP_NUM_THREADS='" + std::string(env) + "' is not an integer from 1 to " +
         std::to_string(kMaxThreads) +
         ": ignored; using the CPUs available (set it to a positive integer or pass --threads N)";
}

int default_thread_count() {
  if (const int n = omp_num_threads(); n > 0) return n;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return std::min(n, kMaxThreads);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? std::min(static_cast<int>(hw), kMaxThreads) : 1;
}

void parallel_for(std::size_t count, int threads,
                  const std::function<void(int, std::size_t)>& body) {
  if (count == 0) return;
  const int workers = static_cast<int>(
      std::min<std::size_t>(count, static_cast<std::size_t>(threads > 0 ? threads : 1)));
  if (workers == 1) {
    for (std::size_t i = 0; i < count; ++i) body(0, i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run = [&](int worker) {
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= count || failed.load()) return;
      try {
        body(worker, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace scaffold::core
