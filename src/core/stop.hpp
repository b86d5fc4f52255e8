// A request to stop a run early and cleanly, e.g. the warning signal a scheduler sends before its
// time limit (CARAML submits with `#SBATCH --signal=B:12@120`). Set from a signal handler
// (async-signal-safe: one lock-free atomic), read by the training loop after each step.
#pragma once

namespace scaffold::core {

// Records that `signal_number` asked the run to stop (the first one wins).
void request_stop(int signal_number) noexcept;
bool stop_requested() noexcept;
// The signal that asked, 0 when none did.
int stop_signal() noexcept;
// Forgets any request (tests; a new run in the same process).
void reset_stop() noexcept;

// Installs request_stop as the handler of each of `signals` (e.g. SIGUSR2, SIGTERM). A second
// delivery of the same signal, more than 2 s after the first, ends the process as the signal's
// default action would, so a user can still interrupt a run that does not stop in time; sooner,
// it is the same request delivered twice (a launcher signalling every process of a job step,
// and a wrapper forwarding it). Throws core::Error naming a signal that cannot be caught.
void install_stop_signals(const int* signals, int count);

}  // namespace scaffold::core
