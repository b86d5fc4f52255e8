#include "suite/stop_signals.hpp"

#include <csignal>
#include <cstring>

#include "core/stop.hpp"

namespace scaffold::suite {

void install_stop_signals() {
  const int signals[] = {SIGUSR2, SIGTERM};
  core::install_stop_signals(signals, 2);
}

std::string signal_name(int signal_number) {
  const char* abbrev = sigabbrev_np(signal_number);
  return (abbrev ? std::string("SIG") + abbrev : std::string("signal")) + " (" + std::to_string(signal_number) + ")";
}

}  // namespace scaffold::suite
