// Which stage a pipeline worker's thread works for (pipeline.cpp): one thread runs all the
// stages of its device.
#pragma once

#include <atomic>
#include <functional>

#include "pipebal/pipeline/mailbox.h"

namespace pipebal::pipeline {

// Turns a worker's thread from stage to stage: a failure names the stage it works for, and on a
// thread of several stages on_stage_enter hears of each change (e.g. to count the allocations
// that follow as that stage's). Once the run is cancelled it calls nothing more: the pipeline
// may have been abandoned after a timeout, and the callback's owner be gone.
class StageTurner {
 public:
  StageTurner(const std::function<void(int)>& enter, bool several,
              const std::atomic<bool>& cancelled, int& current)
      : enter_(several ? enter : nullptr), cancelled_(cancelled), current_(current) {}

  void to(int stage) {
    if (cancelled_.load()) throw ChannelCancelled();
    current_ = stage;
    if (enter_ && stage != entered_) {
      enter_(stage);
      entered_ = stage;
    }
  }

 private:
  std::function<void(int)> enter_;
  const std::atomic<bool>& cancelled_;
  int& current_;
  int entered_ = -1;
};

}  // namespace pipebal::pipeline
