// See heartbeat.h.
#include "pipebal/distributed/heartbeat.h"

#include <algorithm>

#include <fmt/format.h>

namespace pipebal::distributed {

std::chrono::milliseconds Heartbeat::silence_limit(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 2, std::chrono::milliseconds(5000), std::chrono::milliseconds(60000));
}

Heartbeat::Heartbeat(int rank, int world_size, std::chrono::milliseconds silence_limit,
                     Clock::time_point start)
    : limit_(silence_limit), last_beat_(start), last_change_(start) {
  if (world_size > 1) watched_ = (rank + 1) % world_size;
}

std::string Heartbeat::key(int rank) {
  return fmt::format("alive/{}", rank);
}

bool Heartbeat::beat_due(Clock::time_point now) {
  if (beaten_ && now - last_beat_ < kPeriod) return false;
  // This process was stopped itself (Ctrl-Z, then fg) or starved of the CPU: the watched rank's
  // count may have stood still because it was stopped too and is not awake yet, and the gap
  // says nothing of it. Its silence is counted from now.
  if (beaten_ && now - last_beat_ > kStalled) last_change_ = now;
  beaten_ = true;
  last_beat_ = now;
  return true;
}

bool Heartbeat::silent(int64_t count, Clock::time_point now) {
  if (count != last_count_) {
    last_count_ = count;
    last_change_ = now;
    return false;
  }
  return now - last_change_ > limit_;
}

}  // namespace pipebal::distributed
