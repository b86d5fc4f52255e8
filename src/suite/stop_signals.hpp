// Graceful stops for every workload: the warning signal a scheduler sends before a time limit
// (Slurm `--signal=USR2@120`, CARAML's `B:12@120`) or a plain SIGTERM asks the training loop to
// finish the step in flight and stop; the driver then writes everything a finished run writes,
// marks the record "time_limit" and exits with kExitStoppedBySignal. restart.sh resumes the run.
// Which signals do that is the global flag --stop-signals (default USR2 and TERM).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/watchdog.hpp"
#include "dist/communicator.hpp"

namespace scaffold::suite {

// The exit status of a run that stopped early on a signal, its files complete (README).
inline constexpr int kExitStoppedBySignal = 3;

// --stop-signals when it is not given.
inline const std::vector<std::string> kDefaultStopSignals{"USR2", "TERM"};

// Signal numbers of names such as "USR2", "SIGUSR2", "12" (case does not matter). Only signals a
// scheduler or a user sends to end a run qualify (USR1, USR2, TERM, INT, HUP, QUIT, XCPU); any
// other, or an empty list, is a core::UsageError naming it and the choices.
std::vector<int> parse_stop_signals(const std::vector<std::string>& names);
// "USR1, USR2, TERM, INT, HUP, QUIT, XCPU" for help texts and errors.
std::string stop_signal_choices();

// Installs the stop handlers for `signals` (parse_stop_signals), SIGUSR2 and SIGTERM when empty.
void install_stop_signals(const std::vector<int>& signals = {});

// The last resort against a run that stops without an error: no finished step or validation batch
// on this rank for `timeout_s` (the progress_timeout_s key; <= 0: never) logs why and ends every
// rank (comm.abort), not a silent hang. The training loop beats it.
std::unique_ptr<core::Watchdog> progress_watchdog(dist::Communicator& comm, int timeout_s);

// "SIGUSR2 (12)" for messages.
std::string signal_name(int signal_number);

}  // namespace scaffold::suite
