// See partition.h.
#include "pipebal/balance/partition.h"

#include <stdexcept>

#include "pipebal/balance/dp_partition.h"
#include "pipebal/balance/heuristic_partition.h"
#include "pipebal/balance/interleaved_partition.h"
#include "pipebal/balance/weight_delays.h"

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

namespace {

// Whether `model` is zb-h1 whose W delays are still to be chosen.
bool delays_to_choose(const CostModel& model) {
  const CostOptions& options = model.options();
  return options.schedule == pipeline::ScheduleKind::kZeroBubbleH1 && options.weight_delays.empty();
}

// `model` with every stage's W delay `delay`.
CostModel with_delays(const CostModel& model, int delay) {
  CostOptions options = model.options();
  options.weight_delays.assign(model.stage_count(), delay);
  return model.with_options(options);
}

// zb-h1 whose W delays are to be chosen is balanced with W right after B (which the delays then
// spend up to the budget), a stage fitting its cap where it fits with its backward whole too
// (the delays go down to that); everything else as it is.
std::vector<int> balance_of(const CostModel& model, Algorithm algorithm) {
  if (delays_to_choose(model)) {
    const CostModel lean = with_delays(model, 0);
    if (algorithm != Algorithm::kDp) return balance_of(lean, algorithm);
    const CostModel whole = with_delays(model, pipeline::kWholeBackward);
    return dp_partition(lean, &whole);
  }
  const std::vector<LayerCost>& layers = model.layers();
  switch (algorithm) {
    case Algorithm::kDp:
      if (model.schedule().kind == pipeline::ScheduleKind::kInterleaved) {
        return interleaved_dp_partition(model).balance;
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

}  // namespace

std::vector<int> partition_balance(const CostModel& model, Algorithm algorithm) {
  return balance_of(model, algorithm);
}

Plan plan_balance(const CostModel& model, const std::vector<int>& balance,
                  const std::string& algorithm) {
  if (!delays_to_choose(model)) return make_plan(model, balance, algorithm);
  const CostModel bounded = model.with_options(with_fastest_weight_delays(model, balance));
  return make_plan(bounded, balance, algorithm);
}

Plan partition(const CostModel& model, Algorithm algorithm) {
  if (algorithm == Algorithm::kDp &&
      model.schedule().kind == pipeline::ScheduleKind::kInterleaved) {
    const InterleavedSearch search = interleaved_dp_partition(model);
    Plan plan = make_plan(model, search.balance, to_string(algorithm));
    plan.search_nodes = search.nodes;
    plan.search_exhaustive = search.exhaustive;
    return plan;
  }
  return plan_balance(model, partition_balance(model, algorithm), to_string(algorithm));
}

}  // namespace pipebal::balance
