// One rank of the tensor channel's test (multiprocess_test.cpp), two processes on loopback:
// rank 1 sends rank 0 three micro-batches' messages on one channel, each tensor by itself over a
// Gloo link matched in order (as NCCL matches). Rank 0 takes the first and checks that it equals
// what was sent, dtypes, shapes, an undefined and an empty tensor and skips alike; then takes
// micro-batch 2 before 1, which must be refused with one error naming the channel and both
// positions, before any of its tensors is received. Exit 0 when so, 1 when not, 2 on an error.
// The ranks leave with _Exit once both are done: the message never taken stays in flight.
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/distributed/group.h"
#include "pipebal/distributed/launch_env.h"
#include "pipebal/distributed/tensor_channel.h"

namespace {

using namespace pipebal;

pipeline::Batch message(int micro_batch) {
  torch::manual_seed(micro_batch);
  pipeline::Batch batch;
  batch.tensors.push_back(torch::randn({3, 4}, torch::kDouble) + micro_batch);
  batch.tensors.push_back(at::Tensor());
  batch.tensors.push_back(torch::randint(0, 9, {3, 2, 5}, torch::kLong).transpose(1, 2));
  batch.tensors.push_back(torch::empty({3, 0}, torch::kFloat));
  batch.skips["skip/a"] = torch::randn({3, 7}, torch::kFloat);
  batch.skips["b"] = torch::tensor({1, 0, 1}, torch::kBool);
  return batch;
}

bool same(const at::Tensor& got, const at::Tensor& want) {
  if (got.defined() != want.defined()) return false;
  return !want.defined() || (got.scalar_type() == want.scalar_type() &&
                             got.sizes() == want.sizes() && torch::equal(got, want));
}

int run() {
  const auto env = distributed::launch_env_from_process();
  if (!env || env->world_size != 2) throw std::invalid_argument("run me as 2 ranks");
  auto group = std::make_shared<distributed::Group>(*env, std::chrono::seconds(30));
  const distributed::ChannelEnds ends{1, 0, 1, 0};  // stage 1 on rank 1 to stage 0 on rank 0
  auto channel = distributed::tensor_channel(group, ends, distributed::gloo_link(*group, ends));
  int status = 0;
  if (group->rank() == 1) {
    for (int mb = 0; mb < 3; ++mb) channel->post(mb, pipeline::Parcel(message(mb)));
    group->await("taken");
  } else {
    channel->expect({0, 2, 1});
    const pipeline::Batch got = channel->take(0).batch;
    const pipeline::Batch want = message(0);
    bool equal = got.tensors.size() == want.tensors.size() && got.skips.size() == want.skips.size();
    for (size_t t = 0; equal && t < want.tensors.size(); ++t)
      equal = same(got.tensors[t], want.tensors[t]);
    for (const auto& [name, tensor] : want.skips)
      equal = equal && got.skips.count(name) == 1 && same(got.skips.at(name), tensor);
    if (!equal) {
      std::cerr << "rank 0: micro-batch 0 differs from what rank 1 sent\n";
      status = 1;
    }
    try {
      (void)channel->take(2);
      std::cerr << "rank 0: micro-batch 2 was taken before micro-batch 1\n";
      status = 1;
    } catch (const std::runtime_error& error) {
      std::cout << error.what() << "\n";
    }
    group->publish("taken", "1");
  }
  std::cout.flush();
  return status;
}

}  // namespace

int main() {
  try {
    std::_Exit(run());
  } catch (const std::exception& error) {
    std::cerr << "rank " << std::getenv("RANK") << ": " << error.what() << "\n";
    std::_Exit(2);
  }
}
