// The errors of a run across processes that come from another process: what the engine's
// transports and the process group throw, and what a rank's exit status and its notice to the
// launcher are chosen by (tools/torch_main.cpp). Torch-free.
#pragma once

#include <stdexcept>
#include <string>

namespace pipebal::distributed {

// Another process of the run failed (or could no longer be reached); the message says which
// and what happened.
class RemoteFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// This process stopped because another rank reported a failure on the board: an echo of that
// failure, not a cause. A rank leaves with kPeerFailedExitStatus on it (launcher.h), telling the
// launcher which rank failed (peer_failure_notice.h).
class PeerFailed : public RemoteFailure {
 public:
  // `failure` as posted, which names the rank it is about first ("rank 2 failed: ...").
  explicit PeerFailed(const std::string& failure);
  // The rank the failure names; -1 where it names none.
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

}  // namespace pipebal::distributed
