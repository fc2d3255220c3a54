// A thread that runs submitted jobs one at a time: each device of a pipeline owns one, so its
// stages' intra-op thread setting (thread-local in OpenMP) and thread pool persist across steps.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace pipebal::pipeline {

class Worker {
 public:
  // `on_start` runs first on the new thread (e.g. to set the intra-op thread count); if it
  // throws, every submitted job's future carries that exception instead of running.
  explicit Worker(std::function<void()> on_start = {});
  // Finishes queued jobs, then joins the thread.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues `job`; the future carries its exception, if any. Any thread may call it.
  std::future<void> submit(std::function<void()> job);

 private:
  void run(const std::function<void()>& on_start);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stopping_ = false;
  std::exception_ptr start_error_;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace pipebal::pipeline
