// How fast each core (or block of cores) runs the model, relative to the fastest: the device
// speeds to plan with when the stages are pinned to them. The cores of a cloud VM can differ for
// long spells (reports/core-speeds.md: on its 2-core VM one took 1.35x as long as the other for
// AmoebaNet-D's step, round after round), and a plan that assumes them equal puts too much on the
// slow one and predicts it wrong.
#pragma once

#include <vector>

namespace pipebal::workflow {

struct CoreSpeeds {
  // By rank_cores: each device's CPUs, fastest first; their speeds relative to the fastest (1),
  // the median time each took for the same work, and its times round by round, in that order.
  // Rounds timed later may be appended to times_ms, and speeds worked out from them again
  // (speeds_round_by_round: relative to the first device, which may then be slower than others).
  std::vector<std::vector<int>> cpus;
  std::vector<double> speeds;
  std::vector<double> ms;
  std::vector<std::vector<double>> times_ms;
};

// From the times each block of `cpus` took for the same work, round after round (`times_ms[d]`
// for block d, at least one each): the blocks ordered by their median time, fastest first (ties
// keep their order), and their speeds relative to it. Throws std::invalid_argument for counts
// that differ or times that are not positive.
CoreSpeeds rank_cores(const std::vector<std::vector<int>>& cpus,
                      const std::vector<std::vector<double>>& times_ms);

// Each device's speed relative to the first from rounds in which every device was timed once
// (`times_ms[d][r]`: device d in round r, as many rounds for each): 1 over the mean, over the
// rounds, of its time divided by the first device's in the same round. Round by round, so that a
// spell that slows every core alike drops out; the mean of the ratios, not their median, since
// a core that is slow in some spells and not in others costs a step what the mix of its spells
// costs on average, and a median would keep only the commoner spell. Throws
// std::invalid_argument for no devices, counts that differ or times that are not positive.
std::vector<double> speeds_round_by_round(const std::vector<std::vector<double>>& times_ms);

}  // namespace pipebal::workflow
