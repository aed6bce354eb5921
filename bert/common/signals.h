#pragma once

namespace bert {

/// Makes SIGINT and SIGTERM requests to stop: the first one sets a flag that long-running work
/// polls at a safe point (a trainer checkpoints and exits as interrupted; a sweep forwards it to
/// its trials); a second one, a second or more later, terminates the process at once.
/// Idempotent.
void install_stop_signals();

/// True once SIGINT or SIGTERM arrived (after install_stop_signals()).
bool stop_signalled();

/// The signal that set the flag (0 when none).
int stop_signal();

}  // namespace bert
