// A pipe from launched processes back to `pipebal launch` (their standard error, their
// peer-failure notices): close-on-exec, the read end non-blocking for the launcher's polling.
// Torch-free.
#pragma once

namespace pipebal::distributed {

struct RelayPipe {
  int read_fd = -1;
  int write_fd = -1;
};

// A new pipe whose ends both lie above the standard streams: the launcher may have been started
// without one of them (2>&-), and a write end numbered 2 would stay close-on-exec after a child's
// dup2 onto 2. Both ends -1 (and nothing left open) when the process is out of descriptors.
RelayPipe open_relay_pipe();

}  // namespace pipebal::distributed
