// See link_probe.h.
#include "pipebal/distributed/link_probe.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "pipebal/distributed/c10d_transport.h"

namespace pipebal::distributed {

std::vector<balance::LinkSample> probe_link(const std::shared_ptr<Group>& group,
                                            const std::vector<int64_t>& sizes, int repeats) {
  std::vector<balance::LinkSample> samples;
  const int rank = group->rank();
  if (rank > 1) return samples;
  // Stage 0 on rank 0 and stage 1 on rank 1: the message goes forward and comes back.
  const auto forward = c10d_channel(group, 0, 1, 0, 1);
  const auto backward = c10d_channel(group, 1, 0, 1, 0);
  for (int64_t bytes : sizes) {
    pipeline::Batch message;
    message.tensors.push_back(at::zeros({std::max<int64_t>(bytes, 1)}, at::kByte));
    auto exchange = [&] {
      if (rank == 0) {
        backward->expect({0});
        forward->post(0, pipeline::Parcel(message));
        (void)backward->take(0);
        forward->flush();  // as a step ends: its buffers are free for the next
      } else {
        forward->expect({0});
        backward->post(0, forward->take(0));
        backward->flush();
      }
    };
    exchange();  // warm-up: connections and buffers
    std::vector<double> one_way_ms;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      exchange();
      one_way_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count() /
          2);
    }
    std::nth_element(one_way_ms.begin(), one_way_ms.begin() + one_way_ms.size() / 2,
                     one_way_ms.end());
    if (rank == 0) samples.push_back({bytes, one_way_ms[one_way_ms.size() / 2]});
  }
  return samples;
}

}  // namespace pipebal::distributed
