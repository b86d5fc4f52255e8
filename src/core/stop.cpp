#include "core/stop.hpp"

#include <atomic>
#include <csignal>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace scaffold::core {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be usable from a signal handler");

extern "C" void on_stop_signal(int signal_number) {
  int expected = 0;
  if (!g_stop_signal.compare_exchange_strong(expected, signal_number) && expected == signal_number) {
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
      throw Error("cannot install a handler for signal " + std::to_string(signals[i]) + ": " + std::strerror(errno));
  }
}

}  // namespace scaffold::core
