// A layer's cost as a function of the micro-batch size. Small micro-batches run GEMMs and
// convolutions less efficiently per sample, so the per-micro-batch cost is not the mini-batch's
// cost over the micro-batch count; a profile measured at several sizes (`pipebal profile
// --chunks 1,2,4,8`) says how it really scales, and this interpolates between those sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/layer_cost.h"

namespace pipebal::balance {

// Where the costs at a size come from.
enum class CostSource {
  kMeasured,      // the size was profiled
  kInterpolated,  // linear between the two measured sizes around it
  kExtrapolated,  // proportional to the size from the nearest measured size, beyond them all
};
const char* to_string(CostSource source);

struct CostsAtSize {
  int64_t micro_batch_size = 0;
  std::vector<LayerCost> layers;
  CostSource source = CostSource::kMeasured;
};

// The samples per micro-batch when `mini_batch` samples are cut into `chunks`: ceil, as the
// engine's scatter makes its first micro-batches.
int64_t micro_batch_size(int64_t mini_batch, int chunks);

// The micro-batch sizes `profile` measured, ascending: its sizes[], else its batch_size alone
// (empty when the profile does not say its batch size).
std::vector<int64_t> measured_sizes(const CostProfile& profile);

// The profile's layer costs at `size` samples per micro-batch: measured, interpolated linearly
// in the size between the two measured sizes around it (times and bytes alike), or, outside
// them, scaled in proportion to the size from the nearest (an estimate that ignores fixed
// per-call costs: the source says so). A profile that does not say its batch size has its
// layers returned as measured. Throws std::invalid_argument for size < 1.
CostsAtSize costs_at_micro_batch_size(const CostProfile& profile, int64_t size);

// The layers to plan `chunks` micro-batches with: the profile's own layers when it does not say
// its mini-batch, else costs_at_micro_batch_size(profile, micro_batch_size(mini, chunks)).
std::vector<LayerCost> layers_for_chunks(const CostProfile& profile, int chunks);

// The cost model of `profile` on `stages` stages for options.chunks micro-batches of its
// mini-batch: layers_for_chunks's costs, and, where the profile measured several sizes, the
// whole mini-batch's own costs for the plan's step with one micro-batch
// (CostModel::whole_batch_layers).
CostModel cost_model_for(const CostProfile& profile, int stages, const CostOptions& options);

}  // namespace pipebal::balance
