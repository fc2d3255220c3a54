// The partitioners by name, as the command line and the benchmark choose them.
#pragma once

#include <string>
#include <vector>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/plan.h"

namespace pipebal::balance {

enum class Algorithm {
  kDp,  // exact minimum bottleneck under memory, speeds and transfers; interleaved: exact
        // minimum simulated step (interleaved_partition.h)
  kBlockPartition,  // torchgpipe's heuristic on forward + backward time per layer
  kUniform,         // equal layer counts
  kParameters,      // balanced parameter bytes, as DeepSpeed's default
};

// "dp", "blockpartition", "uniform", "parameters"; parse throws std::invalid_argument listing them.
std::string to_string(Algorithm algorithm);
Algorithm parse_algorithm(const std::string& name);
// Every algorithm, dp first.
const std::vector<Algorithm>& all_algorithms();

// Layers per stage chosen by `algorithm` for `model`'s layers and stage count. zb-h1 without
// W delays in the options is balanced with W right after B (1F1B's memory): its delays are
// chosen for the balance afterwards (plan_balance).
std::vector<int> partition_balance(const CostModel& model, Algorithm algorithm);

// make_plan(model, balance, algorithm), except for zb-h1 without W delays in the options: costed
// and simulated with the delays fastest_weight_delays chooses for the balance (weight_delays.h).
Plan plan_balance(const CostModel& model, const std::vector<int>& balance,
                  const std::string& algorithm);

// partition_balance planned by plan_balance.
Plan partition(const CostModel& model, Algorithm algorithm);

}  // namespace pipebal::balance
