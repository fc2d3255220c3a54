// Whether the processes of other hosts are still there, which no pidfd can tell: a host that
// goes down, or is cut off, closes no connection, and a process stopped (SIGSTOP, a debugger)
// ends nothing. Each process counts up a key of its own on the rendezvous store, and watches
// the count of the next rank (ring order: every rank is watched by one other, and the store
// answers four requests per process and second, whatever the world size). A count that stops
// moving for the silence limit names its rank. The store calls are the group's; this is the
// bookkeeping, with the time given, so that it can be tested without waiting. Torch-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pipebal::distributed {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  // How often a process beats.
  static constexpr std::chrono::milliseconds kPeriod{500};
  // A gap between this process's beats past which it was stopped or starved itself.
  static constexpr std::chrono::milliseconds kStalled{4 * kPeriod};

  // How long a watched rank may stay silent: half the run's timeout, from 5 to 60 s (a few
  // missed beats are a busy machine, not a lost host; a short --timeout ends a wait first).
  static std::chrono::milliseconds silence_limit(std::chrono::milliseconds timeout);

  Heartbeat(int rank, int world_size, std::chrono::milliseconds silence_limit,
            Clock::time_point start);

  // The store key process `rank` counts up.
  static std::string key(int rank);

  // The rank this process watches: the next one; nullopt when it runs alone.
  std::optional<int> watched() const { return watched_; }

  // Whether this process is due to beat at `now` (a period since its last beat); if so, the
  // beat is counted as done. After a gap past kStalled (this process stopped, then resumed), the
  // watched rank's silence starts again from `now`.
  bool beat_due(Clock::time_point now);

  // Takes the watched rank's count as read at `now`: whether it has not moved for longer than
  // the silence limit.
  bool silent(int64_t count, Clock::time_point now);

  // How long the watched rank may stay silent.
  std::chrono::milliseconds limit() const { return limit_; }

 private:
  std::optional<int> watched_;
  std::chrono::milliseconds limit_;
  Clock::time_point last_beat_;
  bool beaten_ = false;
  int64_t last_count_ = -1;
  Clock::time_point last_change_;
};

}  // namespace pipebal::distributed
