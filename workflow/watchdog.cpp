// See watchdog.h.
#include "pipebal/workflow/watchdog.h"

#include <iostream>

#include <fmt/format.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/common/time_limit.h"

namespace pipebal::workflow {

Watchdog::Watchdog(double timeout_s, std::string what)
    : timeout_s_(timeout_s), what_(std::move(what)) {
  if (timeout_s_ > 0) check_time_limit(timeout_s_, "--timeout", "none");  // a deadline must fit
  if (timeout_s_ > 0) thread_ = std::thread(&Watchdog::watch, this);
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::beat(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = std::move(what);
  last_beat_ = Clock::now();
}

void Watchdog::watch() {
  const auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const Clock::time_point deadline = last_beat_ + timeout;
    if (Clock::now() >= deadline) {
      std::cerr << fmt::format("pipebal: error: no progress for {:g} s (--timeout) while {}\n",
                               timeout_s_, what_)
                << std::flush;
      // The stuck work cannot be stopped; nothing half-written is left behind.
      remove_temporaries_and_exit_now(2);
    }
    changed_.wait_until(lock, deadline);
  }
}

}  // namespace pipebal::workflow
