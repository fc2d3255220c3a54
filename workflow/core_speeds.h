// How fast each core (or block of cores) runs the model, relative to the fastest: the device
// speeds to plan with when the stages are pinned to them. The cores of a cloud VM can differ for
// long spells (reports/core-speeds.md: on its 2-core VM one took 1.35x as long as the other for
// AmoebaNet-D's step, round after round), and a plan that assumes them equal puts too much on the slow
// one and predicts it wrong.
#pragma once

#include <vector>

namespace pipebal::workflow {

struct CoreSpeeds {
  std::vector<std::vector<int>> cpus;  // each device's CPUs, fastest first
  std::vector<double> speeds;          // relative to the fastest (1), in the same order
  std::vector<double> ms;              // the median time each took for the same work
};

// From the times each block of `cpus` took for the same work, round after round (`times_ms[d]`
// for block d, at least one each): the blocks ordered by their median time, fastest first (ties
// keep their order), and their speeds relative to it. Throws std::invalid_argument for counts
// that differ or times that are not positive.
CoreSpeeds rank_cores(const std::vector<std::vector<int>>& cpus,
                      const std::vector<std::vector<double>>& times_ms);

}  // namespace pipebal::workflow
