// See time_limit.h.
#include "pipebal/common/time_limit.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal {

void check_time_limit(double seconds, const std::string& what, const std::string& zero_means) {
  // Read from its bits: once subnormals are flushed (workflow/denormals.h), a subnormal compares
  // equal to 0, and 1e-310 would quietly mean no limit.
  uint64_t bits = 0;
  std::memcpy(&bits, &seconds, sizeof bits);
  const bool nonzero = (bits << 1) != 0;
  if (nonzero && seconds >= 0 && !(seconds >= kMinTimeLimitS)) {
    // Flushed, a subnormal prints as 0: say what it is.
    const std::string given = seconds == 0 ? "a subnormal number" : fmt::format("{:g}", seconds);
    throw std::invalid_argument(fmt::format("{} must be 0{} or at least a millisecond, got {}",
                                            what, zero_means.empty() ? "" : " (" + zero_means + ")",
                                            given));
  }
  if (seconds >= 0 && seconds <= kMaxTimeLimitS) return;
  throw std::invalid_argument(
      fmt::format("{} must be from 0 to {:.0f} seconds{}, got {}", what, kMaxTimeLimitS,
                  zero_means.empty() ? "" : " (0: " + zero_means + ")", seconds));
}

}  // namespace pipebal
