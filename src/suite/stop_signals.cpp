#include "suite/stop_signals.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/stop.hpp"

namespace scaffold::suite {
namespace {

const std::pair<const char*, int> kStopSignals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU},
};

int parse_one(const std::string& text) {
  std::string name;
  for (char c : text) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  const bool numeric = !name.empty() && std::all_of(name.begin(), name.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
  for (const auto& [known, number] : kStopSignals)
    if (name == known || (numeric && name.size() < 4 && std::stoi(name) == number)) return number;
  throw core::UsageError("'" + text + "' is not a signal that can stop a run (choices: " +
                         stop_signal_choices() + ", or their numbers)");
}

}  // namespace

std::vector<int> parse_stop_signals(const std::vector<std::string>& names) {
  std::vector<int> signals;
  for (const std::string& name : names) {
    const int number = parse_one(name);
    if (std::find(signals.begin(), signals.end(), number) == signals.end())
      signals.push_back(number);
  }
  if (signals.empty())
    throw core::UsageError("give at least one signal (choices: " + stop_signal_choices() + ")");
  return signals;
}

std::string stop_signal_choices() {
  std::string text;
  for (const auto& [name, number] : kStopSignals)
    text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

void install_stop_signals(const std::vector<int>& signals) {
  const std::vector<int> chosen = signals.empty() ? std::vector<int>{SIGUSR2, SIGTERM} : signals;
  core::install_stop_signals(chosen.data(), static_cast<int>(chosen.size()));
}

std::string signal_name(int signal_number) {
  const char* abbrev = sigabbrev_np(signal_number);
  return (abbrev ? std::string("SIG") + abbrev : std::string("signal")) + " (" +
         std::to_string(signal_number) + ")";
}

std::unique_ptr<core::Watchdog> progress_watchdog(dist::Communicator& comm, int timeout_s) {
  return std::make_unique<core::Watchdog>(timeout_s, [&comm, timeout_s](double idle_s) {
    LOG_ERROR(
        "rank {}: no training progress for {:.0f} s (progress_timeout_s = {}): a rank or the file "
        "system is "
        "stuck; ending all {} rank(s)",
        comm.rank(), idle_s, timeout_s, comm.size());
    comm.abort(1);
  });
}

}  // namespace scaffold::suite
