// A condition variable whose waiters poll for a while before they sleep. Between the stages of a
// pipeline a message is often due within a fraction of a millisecond, and waking a sleeping
// thread costs about as much: on a VM the waiter's idle vCPU must first be woken by the host
// (0.2 ms per hand-off on a 2-core VM, where it doubled the step of a 16-layer 64-wide MLP). A
// polling waiter sees the change within microseconds. Like OpenMP's workers between parallel
// regions it gives up after a bound, and each poll yields the core: with more stage threads than
// cores a busy poll (a bare `pause` loop) took the time slices the other stages needed, 2.9x
// the step; yielding costs nothing there.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace pipebal::pipeline {

class SpinningCondition {
 public:
  // How long a waiter polls before it sleeps.
  static constexpr std::chrono::microseconds kPoll{1000};

  // Returns once `ready()` is true; `ready` is called with `lock` held, as for
  // std::condition_variable::wait.
  template <typename Ready>
  void wait(std::unique_lock<std::mutex>& lock, Ready ready) {
    if (ready()) return;
    const auto until = std::chrono::steady_clock::now() + kPoll;
    for (;;) {
      // Read under the lock: a change made after `ready()` said no comes after this value.
      const uint64_t seen = changes_.load(std::memory_order_acquire);
      lock.unlock();
      bool in_time = true;
      while (changes_.load(std::memory_order_acquire) == seen &&
             (in_time = std::chrono::steady_clock::now() < until)) {
        std::this_thread::yield();
      }
      lock.lock();
      if (ready()) return;
      if (!in_time) break;
    }
    changed_.wait(lock, ready);
  }

  // After changing what waiters' `ready` reads (under their mutex), with or without holding it.
  void notify_all() {
    changes_.fetch_add(1, std::memory_order_release);
    changed_.notify_all();
  }

 private:
  std::condition_variable changed_;
  std::atomic<uint64_t> changes_{0};
};

}  // namespace pipebal::pipeline
