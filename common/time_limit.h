// Time limits users give in seconds (a step timeout, a launcher's grace period, a profiling
// budget). Torch-free. A limit becomes a std::chrono deadline, which past ~9.2e9 s overflows into
// one in the past: a huge or infinite limit would fire at once. One bound for all of them, far past
// any real step or job, keeps that from happening.
#pragma once

#include <string>

namespace pipebal {

constexpr double kMaxTimeLimitS = 1e6;   // about 11.6 days
constexpr double kMinTimeLimitS = 1e-3;  // a positive limit below it is a typo

// Throws std::invalid_argument "`what` must be from 0 to 1000000 seconds[ (0: `zero_means`)],
// got X" unless 0 <= seconds <= kMaxTimeLimitS (NaN included), and one saying so for a
// positive limit below kMinTimeLimitS (a millisecond: timeouts count in them).
void check_time_limit(double seconds, const std::string& what, const std::string& zero_means = "");

}  // namespace pipebal
