// How a rank tells `pipebal launch` that it stopped because another rank failed, not on a
// failure of its own. Its exit status (kPeerFailedExitStatus) alone cannot say so: any command
// may exit with 3 for reasons of its own. The launcher passes each process the write end of a
// pipe, named in PIPEBAL_LAUNCH_NOTICE_FD as "FD:INODE"; a rank stopped by another's failure
// writes a line there before it exits: its RANK, and the rank that failed where it knows it. The
// inode tells the pipe apart from whatever else a process between the launcher and the rank (one
// that closes the descriptors it does not know) may have opened under that number since.
// Torch-free.
#pragma once

#include <map>
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
  // PIPEBAL_LAUNCH_NOTICE_FD's value: "FD:INODE" of the write end; "" without a pipe.
  const std::string& variable_value() const { return value_; }
  // Whether `rank` said it stopped for another's failure. Call it once the rank has ended: what
  // it wrote before is in the pipe by then.
  bool noticed(int rank);
  // The rank that `rank` said failed; -1 where it did not say (or said nothing).
  int failed_rank(int rank);

 private:
  void read_notices();

  int read_fd_ = -1, write_fd_ = -1;
  std::map<int, int> failed_;  // by rank that wrote a notice: the rank it named, or -1
  std::string value_;
  std::string unread_;  // the start of a line not read whole yet
};

// The rank's side: writes this process's RANK and `failed_rank` (where not -1) to the launcher's
// pipe, when it was launched with one and still has it (a launcher gone meanwhile is no
// SIGPIPE). Never throws.
void notify_launcher_of_peer_failure(int failed_rank) noexcept;

}  // namespace pipebal::distributed
