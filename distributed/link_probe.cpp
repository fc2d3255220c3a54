// See link_probe.h.
#include "distributed/link_probe.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/tags.h"

namespace pipebal::distributed {

std::vector<balance::LinkSample> probe_link(Group& group, const std::vector<int64_t>& sizes,
                                            int repeats) {
  std::vector<balance::LinkSample> samples;
  const int rank = group.rank();
  if (rank > 1) return samples;
  const int peer = 1 - rank;
  for (int64_t bytes : sizes) {
    std::vector<at::Tensor> message{at::empty({std::max<int64_t>(bytes, 1)}, at::kByte)};
    auto exchange = [&] {
      const std::string what = fmt::format("measuring the link with rank {}", peer);
      if (rank == 0) {
        auto sent = group.process_group().send(message, peer, kLinkTag);
        group.wait(*sent, what);
        auto received = group.process_group().recv(message, peer, kLinkTag);
        group.wait(*received, what);
      } else {
        auto received = group.process_group().recv(message, peer, kLinkTag);
        group.wait(*received, what);
        auto sent = group.process_group().send(message, peer, kLinkTag);
        group.wait(*sent, what);
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
