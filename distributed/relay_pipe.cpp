// See relay_pipe.h.
#include "pipebal/distributed/relay_pipe.h"

#include <fcntl.h>
#include <unistd.h>

namespace pipebal::distributed {

RelayPipe open_relay_pipe() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return {};
  for (int& end : ends) {
    if (end > STDERR_FILENO) continue;
    const int moved = fcntl(end, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(end);
    end = moved;
  }
  if (ends[0] < 0 || ends[1] < 0) {
    for (const int end : ends) {
      if (end >= 0) close(end);
    }
    return {};
  }
  fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK);
  return {ends[0], ends[1]};
}

}  // namespace pipebal::distributed
