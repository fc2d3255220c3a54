// See worker.h.
#include "pipebal/pipeline/worker.h"

namespace pipebal::pipeline {

Worker::Worker(std::function<void()> on_start)
    : thread_([this, on_start = std::move(on_start)] { run(on_start); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<void> Worker::submit(std::function<void()> job) {
  // start_error_ is written on the worker thread before it runs any job: no race.
  std::packaged_task<void()> task([this, job = std::move(job)] {
    if (start_error_) std::rethrow_exception(start_error_);
    job();
  });
  std::future<void> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(task));
  }
  wake_.notify_one();
  return done;
}

void Worker::run(const std::function<void()>& on_start) {
  try {
    if (on_start) on_start();
  } catch (...) {
    start_error_ = std::current_exception();  // every job reports it
  }
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      task = std::move(jobs_.front());
      jobs_.pop_front();
    }
    task();  // exceptions land in the task's future
  }
}

}  // namespace pipebal::pipeline
