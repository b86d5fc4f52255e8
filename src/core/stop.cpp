#include "core/stop.hpp"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>

#include "core/error.hpp"

namespace scaffold::core {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<int64_t> g_first_ns{0};  // CLOCK_MONOTONIC of the request, from the handler
static_assert(std::atomic<int>::is_always_lock_free,
              "the stop flag must be usable from a signal handler");
static_assert(std::atomic<int64_t>::is_always_lock_free,
              "the stop time must be usable from a signal handler");

// A repeat this soon after the first delivery is the same request arriving twice: Slurm signals
// every process of a job step, so a wrapper that forwards it (scaffold power) doubles it.
constexpr int64_t kRepeatWindowNs = 2'000'000'000;

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

extern "C" void on_stop_signal(int signal_number) {
  int expected = 0;
  const int64_t now = monotonic_ns();
  if (g_stop_signal.compare_exchange_strong(expected, signal_number)) {
    g_first_ns.store(now);
  } else if (expected == signal_number && now - g_first_ns.load() > kRepeatWindowNs) {
    std::signal(signal_number, SIG_DFL);  // asked twice: end the process as the signal would
    std::raise(signal_number);
  }
}

}  // namespace

void request_stop(int signal_number) noexcept {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, signal_number);
}

bool stop_requested() noexcept {
  return g_stop_signal.load() != 0;
}

int stop_signal() noexcept {
  return g_stop_signal.load();
}

void reset_stop() noexcept {
  g_stop_signal.store(0);
}

void install_stop_signals(const int* signals, int count) {
  for (int i = 0; i < count; ++i) {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(signals[i], &action, nullptr) != 0)
      throw Error("cannot install a handler for signal " + std::to_string(signals[i]) + ": " +
                  std::strerror(errno));
  }
}

}  // namespace scaffold::core
