// Graceful stops for every workload: the warning signal a scheduler sends before a time limit
// (Slurm `--signal=B:USR2@120`, CARAML's `B:12@120`) or a plain SIGTERM asks the training loop to
// finish the step in flight and stop; the driver then writes everything a finished run writes,
// marks the record "time_limit" and exits with kExitStoppedBySignal. restart.sh resumes the run.
#pragma once

#include <string>

namespace scaffold::suite {

// The exit status of a run that stopped early on a signal, its files complete (README).
inline constexpr int kExitStoppedBySignal = 3;

// Installs the stop handlers for SIGUSR2 and SIGTERM.
void install_stop_signals();

// "SIGUSR2 (12)" for messages.
std::string signal_name(int signal_number);

}  // namespace scaffold::suite
