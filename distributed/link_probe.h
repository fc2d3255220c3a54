// Measures the link between ranks 0 and 1 of a run: messages of each size go back and forth
// through the engine's own channels (c10d_transport.h: in shared memory on one host, else over
// Gloo), and half the median round trip is the one-way time. Other ranks take no part.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipebal/balance/link_model.h"
#include "pipebal/distributed/group.h"

namespace pipebal::distributed {

// Every rank calls it; ranks 0 and 1 exchange `repeats` round trips of each size after one
// warm-up round trip. Rank 0 gets a sample per size, the others an empty vector.
std::vector<balance::LinkSample> probe_link(const std::shared_ptr<Group>& group,
                                            const std::vector<int64_t>& sizes, int repeats);

}  // namespace pipebal::distributed
