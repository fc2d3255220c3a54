// The sends of one channel still in flight, each with the tensor it reads, which must stay alive
// until the send is done (gloo_channel.cpp, tensor_channel.cpp).
#pragma once

#include <deque>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "pipebal/distributed/group.h"

namespace pipebal::distributed {

class SendsInFlight {
 public:
  // `what` names the sends in the errors of their waits ("sending to rank 1").
  SendsInFlight(Group& group, std::string what) : group_(group), what_(std::move(what)) {}

  // Adds a send of `tensor`; lets go first of those done (waiting on one says if it failed).
  void add(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor);
  // Returns once every send is done.
  void wait_all();

 private:
  struct Send {
    c10::intrusive_ptr<c10d::Work> work;
    at::Tensor tensor;
  };

  Group& group_;
  std::string what_;
  std::deque<Send> sends_;  // in the order sent
};

}  // namespace pipebal::distributed
