// See co_runner.h.
#include "pipebal/profiler/co_runner.h"

#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include "pipebal/common/thread_pinning.h"
#include "pipebal/pipeline/in_place.h"

namespace pipebal::profiler {

CoRunners::CoRunners(const pipeline::LayerSeq& model, const pipeline::Batch& sample, int count,
                     int threads, const std::vector<std::vector<int>>& cpus) {
  try {
    for (int i = 0; i < count; ++i) {
      // A new thread starts on its creator's CPUs: pinned here, a pin that fails fails the
      // constructor, and the runner's pool (started on it) inherits them.
      std::optional<ThreadPin> pin;
      if (i < static_cast<int>(cpus.size())) pin.emplace(cpus[static_cast<size_t>(i)]);
      threads_.emplace_back(&CoRunners::run, this, model.clone(), sample, threads);
    }
  } catch (...) {
    stop();  // the runners already started, before the error leaves the constructor
    throw;
  }
}

CoRunners::~CoRunners() {
  stop();
}

void CoRunners::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void CoRunners::pause() {
  std::unique_lock<std::mutex> lock(mutex_);
  paused_ = true;
  changed_.wait(lock, [&] { return idle_ + finished_ == static_cast<int>(threads_.size()); });
}

void CoRunners::resume() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = false;
  }
  changed_.notify_all();
}

void CoRunners::run(pipeline::LayerSeq model, pipeline::Batch sample, int threads) {
  at::internal::lazy_init_num_threads();
  at::set_num_threads(threads);
  model.train(true);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (paused_ && !stopping_) {
        ++idle_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return !paused_ || stopping_; });
        --idle_;
      }
      if (stopping_) return;
    }
    try {
      // On a copy: a first layer that writes its input in place must neither write the sample
      // the profiled layers read meanwhile nor drift from it.
      const at::Tensor out = model.forward(pipeline::copied_inputs(sample)).value();
      if (out.requires_grad()) out.sum().backward();
    } catch (const std::exception&) {
      // The profiled layers will report the same failure with context. A runner that ended
      // holds nothing back: pause() must not wait for it.
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_;
      changed_.notify_all();
      return;
    }
    for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
  }
}

}  // namespace pipebal::profiler
