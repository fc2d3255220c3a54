// Every process of a multi-process run must be started with the same settings. A rank given
// another --chunks or --steps waits for messages that never come (until the timeout, naming
// the wrong thing), and one given another --seed or data file trains silently on other
// weights or samples. So at the rendezvous each rank posts its settings and rank 0 compares
// them with its own before any message flows.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipebal::distributed {

class Group;

// A setting every process must share: its name as a user knows it (a flag such as "--chunks",
// or "model weights"), and its value as text. A digest stands for contents too large to
// compare as text (weights, data), and the message then names the difference without values.
struct SharedSetting {
  std::string name;
  std::string value;
  bool digest = false;
};
using SharedSettings = std::vector<SharedSetting>;

// The first difference between rank 0's settings and another rank's (the lowest such rank, its
// first setting that differs), as one line; nullopt when every rank's equal rank 0's.
// by_rank[r] holds rank r's.
std::optional<std::string> settings_difference(const std::vector<SharedSettings>& by_rank);

// Every rank calls it once, after the rendezvous, and it returns once every rank's settings
// (`mine`, and the PIPEBAL_TENSOR_CHANNEL switch) are known to equal rank 0's. Otherwise rank 0
// posts the difference as the run's failure and throws std::invalid_argument with it; the other
// ranks throw PeerFailed with it (remote_failure.h).
void require_same_settings(Group& group, const SharedSettings& mine);

}  // namespace pipebal::distributed
