// See time_limit.h.
#include "common/time_limit.h"

#include <stdexcept>

#include <fmt/format.h>

namespace pipebal {

void check_time_limit(double seconds, const std::string& what, const std::string& zero_means) {
  if (seconds >= 0 && seconds <= kMaxTimeLimitS) return;
  throw std::invalid_argument(
      fmt::format("{} must be from 0 to {:.0f} seconds{}, got {:g}", what, kMaxTimeLimitS,
                  zero_means.empty() ? "" : " (0: " + zero_means + ")", seconds));
}

}  // namespace pipebal
