// A thread-safe mailbox between two pipeline stages, keyed by micro-batch: the sender posts
// a micro-batch's activations (or gradients), the receiver waits for that micro-batch.
// Cancelling wakes every waiter with ChannelCancelled, so a failing stage never leaves its
// neighbours blocked.
#pragma once

#include <map>
#include <mutex>
#include <stdexcept>

#include "pipebal/pipeline/spinning_condition.h"

namespace pipebal::pipeline {

// A stage's wait for a message was ended because a stage failed elsewhere; the failing stage's
// error is the one to report.
struct ChannelCancelled : std::runtime_error {
  ChannelCancelled() : std::runtime_error("pipeline cancelled by a failure in another stage") {}
};

// Any thread may call any member.
template <typename Message>
class Mailbox {
 public:
  void post(int micro_batch, Message message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.insert_or_assign(micro_batch, std::move(message));
    }
    ready_.notify_all();
  }

  // Blocks until `micro_batch` has been posted, then removes and returns it.
  Message take(int micro_batch) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return cancelled_ || messages_.count(micro_batch) > 0; });
    if (cancelled_) throw ChannelCancelled();
    auto node = messages_.extract(micro_batch);
    return std::move(node.mapped());
  }

  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    ready_.notify_all();
  }

  // Empties the mailbox and clears the cancellation, ready for the next step.
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.clear();
    cancelled_ = false;
  }

 private:
  std::mutex mutex_;
  SpinningCondition ready_;
  std::map<int, Message> messages_;
  bool cancelled_ = false;
};

}  // namespace pipebal::pipeline
