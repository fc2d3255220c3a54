// See sends_in_flight.h.
#include "pipebal/distributed/sends_in_flight.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace pipebal::distributed {

void SendsInFlight::add(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor) {
  while (!sends_.empty() && sends_.front().work->isCompleted()) {
    group_.wait(*sends_.front().work, what_);
    sends_.pop_front();
  }
  sends_.push_back({std::move(work), std::move(tensor)});
}

void SendsInFlight::wait_all() {
  for (Send& send : sends_) group_.wait(*send.work, what_);
  sends_.clear();
}

}  // namespace pipebal::distributed
