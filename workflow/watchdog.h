// Ends the process when work stops making progress: a layer that never returns cannot be
// interrupted, so after `timeout_s` seconds without a beat() the watchdog prints one line
// naming what was last seen and exits with status 2. For phases outside the pipeline (which
// has its own per-step timeout, pipeline::StepTimeout), e.g. profiling.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace pipebal::workflow {

class Watchdog {
 public:
  // `timeout_s` <= 0: never fires; past kMaxTimeLimitS (common/time_limit.h): invalid_argument.
  // `what` describes the work until the first beat().
  Watchdog(double timeout_s, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: the clock starts again; `what` says where the work now is.
  void beat(std::string what);

 private:
  void watch();

  using Clock = std::chrono::steady_clock;
  double timeout_s_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string what_;
  Clock::time_point last_beat_ = Clock::now();
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pipebal::workflow
