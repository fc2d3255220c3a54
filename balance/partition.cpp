// See partition.h.
#include "balance/partition.h"

#include <stdexcept>

#include "balance/dp_partition.h"
#include "balance/heuristic_partition.h"
#include "balance/interleaved_partition.h"

namespace pipebal::balance {

std::string to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kDp:
      return "dp";
    case Algorithm::kBlockPartition:
      return "blockpartition";
    case Algorithm::kUniform:
      return "uniform";
    case Algorithm::kParameters:
      return "parameters";
  }
  return "dp";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm algorithm : all_algorithms()) {
    if (to_string(algorithm) == name) return algorithm;
  }
  throw std::invalid_argument("unknown algorithm '" + name +
                              "' (valid: dp, blockpartition, uniform, parameters)");
}

const std::vector<Algorithm>& all_algorithms() {
  static const std::vector<Algorithm> kAll = {Algorithm::kDp, Algorithm::kBlockPartition,
                                              Algorithm::kUniform, Algorithm::kParameters};
  return kAll;
}

std::vector<int> partition_balance(const CostModel& model, Algorithm algorithm) {
  const std::vector<LayerCost>& layers = model.layers();
  switch (algorithm) {
    case Algorithm::kDp:
      if (model.schedule().kind == pipeline::ScheduleKind::kInterleaved) {
        return interleaved_partition(model, dp_partition(model)).balance;
      }
      return dp_partition(model);
    case Algorithm::kBlockPartition: {
      // torchgpipe's balance_by_time measures forward + backward per layer.
      std::vector<double> times_ms;
      for (const LayerCost& layer : layers)
        times_ms.push_back(layer.forward_ms + layer.backward_ms);
      return block_partition(times_ms, model.stage_count());
    }
    case Algorithm::kUniform:
      return uniform_partition(model.layer_count(), model.stage_count());
    case Algorithm::kParameters: {
      std::vector<int64_t> params;
      for (const LayerCost& layer : layers) params.push_back(layer.param_bytes);
      return min_max_partition(params, model.stage_count());
    }
  }
  throw std::invalid_argument("unknown algorithm");
}

Plan partition(const CostModel& model, Algorithm algorithm) {
  if (algorithm == Algorithm::kDp &&
      model.schedule().kind == pipeline::ScheduleKind::kInterleaved) {
    const InterleavedSearch search = interleaved_partition(model, dp_partition(model));
    Plan plan = make_plan(model, search.balance, to_string(algorithm));
    plan.search_nodes = search.nodes;
    plan.search_exhaustive = search.exhaustive;
    return plan;
  }
  return make_plan(model, partition_balance(model, algorithm), to_string(algorithm));
}

}  // namespace pipebal::balance
