// How a rank tells `pipebal launch` that it stopped because another rank failed, not on a
// failure of its own. Its exit status (kPeerFailedExitStatus) alone cannot say so: any command
// may exit with 3 for reasons of its own. The launcher passes each process the write end of a
// pipe (PIPEBAL_LAUNCH_NOTICE_FD); a rank stopped by another's failure writes its RANK there
// before it exits. Torch-free.
#pragma once

#include <set>
#include <string>

namespace pipebal::distributed {

// Names the pipe's write end in a launched process's environment.
constexpr const char* kNoticeFdVariable = "PIPEBAL_LAUNCH_NOTICE_FD";

// The launcher's side: the pipe, and the ranks that wrote to it.
class PeerFailureNotices {
 public:
  PeerFailureNotices();  // without a pipe (out of descriptors) no rank is ever noticed
  ~PeerFailureNotices();
  PeerFailureNotices(const PeerFailureNotices&) = delete;
  PeerFailureNotices& operator=(const PeerFailureNotices&) = delete;

  // The descriptor a launched process inherits (close-on-exec until the child clears it); -1
  // without a pipe.
  int write_end() const { return write_fd_; }
  // Whether `rank` said it stopped for another's failure. Call it once the rank has ended: what
  // it wrote before is in the pipe by then.
  bool noticed(int rank);

 private:
  int read_fd_ = -1, write_fd_ = -1;
  std::set<int> ranks_;
  std::string unread_;  // the start of a line not read whole yet
};

// The rank's side: writes this process's RANK to the launcher's pipe, when it was launched with
// one. Never throws.
void notify_launcher_of_peer_failure() noexcept;

}  // namespace pipebal::distributed
