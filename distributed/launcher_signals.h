// The signals `pipebal launch` acts on while it runs: SIGTERM, and SIGINT, SIGQUIT and SIGHUP
// unless found ignored (passed on to its processes), SIGTSTP (they stop with it) and SIGCHLD
// (when to look at them). The handlers only note what came; the launch's loop (supervisor.h)
// reads the notes. Torch-free.
#pragma once

#include <signal.h>

namespace pipebal::distributed {

// The launcher's handlers, installed with every note cleared; the caller's back on every way out.
class LauncherSignals {
 public:
  LauncherSignals();
  ~LauncherSignals();
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_quit_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_tstp_ {};
  struct sigaction old_chld_ {};
};

// The last of SIGINT, SIGTERM, SIGQUIT and SIGHUP that came since the handlers were installed (0:
// none), and how many came in all (a second one kills at once).
int interrupt_signal();
int interrupts_received();

// Whether a Ctrl-Z (SIGTSTP), or a SIGCHLD (a process ended, stopped or went on), came since the
// last call; the note is cleared.
bool take_suspend();
bool take_child_signal();

}  // namespace pipebal::distributed
