// How `pipebal launch` watches the processes it started to their end: it passes the launcher's
// signals on to them (launcher_signals.h), after the first failure (or interrupt) stops the rest,
// SIGTERM then SIGKILL, and says which process failed first (launcher.h's launch() tells the
// whole behaviour). Torch-free.
#pragma once

#include <sys/types.h>

#include <vector>

#include "pipebal/distributed/launcher.h"
#include "pipebal/distributed/peer_failure_notice.h"
#include "pipebal/distributed/stderr_relay.h"

namespace pipebal::distributed {

// The processes launched, each the first of a process group of its own, which the launcher
// signals whole (what a process starts may outlive it). They are reaped only at the end
// (supervise), so that no group's id can pass to another process meanwhile; should launch() leave
// early (an exception), what is left of them is killed and reaped.
struct Launched {
  std::vector<pid_t> pids;
  std::vector<bool> ended;
  bool reaped = false;

  Launched() = default;
  Launched(const Launched&) = delete;
  Launched& operator=(const Launched&) = delete;
  ~Launched();
  void reap_all();
};

// Watches `children`, the processes of ranks first_rank, first_rank + 1, ..., to their end, their
// standard error coming through `relay`; returns the launch's exit status.
int supervise(const LaunchOptions& options, int first_rank, Launched& children, StderrRelay& relay,
              PeerFailureNotices& notices);

}  // namespace pipebal::distributed
