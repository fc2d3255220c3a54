// Progress of a long command, on stderr. On a terminal: one line rewritten in place — what is
// being counted, k of n, elapsed time and an estimate of the time left. Elsewhere (a log, a
// pipe): plain lines, flushed at once, at most one a second per phase plus the last of each
// phase, so that a log shows how far a run got. Quiet: nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>

namespace pipebal::tools {

class Progress {
 public:
  enum class Mode { kQuiet, kLines, kLive };

  // kQuiet when `quiet`, else kLive when stderr is a terminal, else kLines.
  static Mode mode_for_stderr(bool quiet);

  // Nothing is shown before `silent_for` has passed (for work that is usually quick).
  Progress(std::ostream& out, Mode mode,
           std::chrono::steady_clock::duration silent_for = std::chrono::seconds(0));
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` units of `phase` ("timed pass"); a new phase restarts the estimate.
  // `detail` is shown after the count (e.g. the layer just measured).
  void update(const std::string& phase, size_t done, size_t total, const std::string& detail = "");
  // Ends a live line, so that the next output starts on a fresh one.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& out_;
  Mode mode_;
  Clock::time_point start_ = Clock::now();
  Clock::duration silent_for_;
  std::string phase_;
  Clock::time_point phase_start_;
  Clock::time_point last_line_;
  bool live_line_open_ = false;
};

// "1.2 s", "3 min 05 s".
std::string format_seconds(double seconds);

}  // namespace pipebal::tools
