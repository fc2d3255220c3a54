// zb-h1 under a memory budget: how long each stage defers its W's.
//
// H1 (Qi et al.) delays stage s's W's by s micro-batches, so that every stage holds as many
// micro-batches as 1F1B's first stage. A stage that keeps more per micro-batch than the first
// (a language model's head) or the output gradients B keeps for W then push the busiest
// device's peak past 1F1B's. Each unit of a stage's delay holds one more micro-batch's
// activations and kept gradients there, so the delays are chosen per stage, as long as the
// budget allows.
#pragma once

#include <vector>

#include "pipebal/balance/cost_model.h"

namespace pipebal::balance {

// For `balance` under `model`'s layers and options (any schedule; costed as zb-h1): per stage
// the longest W delay, up to H1's (h1_weight_delays), whose peak stays within the stage's
// budget, and pipeline::kWholeBackward (the backward not split, 1F1B's memory) where not even 0
// does: W right after B still holds what B kept for it at the end of B. The budget is the
// stage's memory cap when `model` has caps; without caps, the busiest stage's peak under 1F1B
// on the same balance, so that zb-h1 needs no more memory than 1F1B. Throws
// std::invalid_argument for a balance that does not fit the model.
std::vector<int> bounded_weight_delays(const CostModel& model, const std::vector<int>& balance);

// Per stage a delay from kWholeBackward up to bounded_weight_delays' (so within the same budget)
// whose simulated step is the shortest: a split backward can cost more than a whole one (B and W
// measured apart), and a shorter delay on one stage can pay where a longer one on another does
// not. Exhaustive over every combination when there are at most kExhaustiveDelayCombinations,
// else coordinate descent from the bounded delays (each stage's best with the others fixed,
// until no stage improves). Ties keep the longer delays; never slower than the bounded delays.
std::vector<int> fastest_weight_delays(const CostModel& model, const std::vector<int>& balance);
inline constexpr int64_t kExhaustiveDelayCombinations = 4096;

// `model`'s options for zb-h1 with `balance`: W delays given in the options are kept, none given
// are chosen by fastest_weight_delays.
CostOptions with_fastest_weight_delays(const CostModel& model, const std::vector<int>& balance);

}  // namespace pipebal::balance
