// See weight_delays.h.
#include "pipebal/balance/weight_delays.h"

#include <algorithm>
#include <utility>

#include "pipebal/balance/plan.h"

namespace pipebal::balance {
namespace {

// `model`'s layers and options under another one-stage-per-device schedule.
CostModel repriced(const CostModel& model, pipeline::ScheduleKind schedule,
                   std::vector<int> weight_delays = {}) {
  CostOptions options = model.options();
  options.schedule = schedule;
  options.virtual_stages = 1;
  options.weight_delays = std::move(weight_delays);
  return model.with_options(options);
}

// `model` as zb-h1 with every stage's delay min(delay, s): stage s's memory depends on its
// own delay alone, so one model per delay prices every stage at that delay.
CostModel zero_bubble_model(const CostModel& model, int delay) {
  std::vector<int> delays;
  for (int s = 0; s < model.stage_count(); ++s) delays.push_back(std::min(delay, s));
  return repriced(model, pipeline::ScheduleKind::kZeroBubbleH1, std::move(delays));
}

}  // namespace

std::vector<int> bounded_weight_delays(const CostModel& model, const std::vector<int>& balance) {
  const int stages = model.stage_count();
  pipeline::check_balance(balance, model.layer_count(), stages);
  std::vector<int> first(stages + 1, 0);
  for (int s = 0; s < stages; ++s) first[s + 1] = first[s] + balance[s];

  std::vector<int64_t> budget(stages);
  if (model.has_memory_caps()) {
    for (int s = 0; s < stages; ++s) budget[s] = model.memory_cap_bytes(s);
  } else {
    const CostModel one_f_one_b = repriced(model, pipeline::ScheduleKind::kOneFOneB);
    int64_t busiest = 0;
    for (int s = 0; s < stages; ++s) {
      busiest = std::max(busiest, one_f_one_b.memory_bytes(s, first[s], first[s + 1]));
    }
    budget.assign(stages, busiest);
  }

  // A stage's peak grows with its delay, so the longest delay that fits is found counting up;
  // where not even W right after B fits, the stage runs its backward whole (1F1B's memory).
  std::vector<int> delays(stages, 0);
  const CostModel right_after(zero_bubble_model(model, 0));
  for (int s = 0; s < stages; ++s) {
    if (right_after.memory_bytes(s, first[s], first[s + 1]) > budget[s]) {
      delays[s] = pipeline::kWholeBackward;
    }
  }
  const int longest = std::min(stages - 1, model.options().chunks);
  for (int delay = 1; delay <= longest; ++delay) {
    const CostModel priced = zero_bubble_model(model, delay);
    for (int s = delay; s < stages; ++s) {
      if (delays[s] == delay - 1 && priced.memory_bytes(s, first[s], first[s + 1]) <= budget[s]) {
        delays[s] = delay;
      }
    }
  }
  return delays;
}

std::vector<int> fastest_weight_delays(const CostModel& model, const std::vector<int>& balance) {
  const std::vector<int> bounds = bounded_weight_delays(model, balance);
  const int stages = model.stage_count();
  const auto step_ms = [&](const std::vector<int>& delays) {
    const CostModel priced = repriced(model, pipeline::ScheduleKind::kZeroBubbleH1, delays);
    return simulate_balance(priced, balance, model.options().chunks).step_ms;
  };
  // Strictly faster only, past rounding: ties keep what was found first, the longer delays.
  const auto faster = [](double candidate, double best) {
    return candidate < best - 1e-9 * std::max(1.0, best);
  };
  std::vector<int> best = bounds;
  double best_ms = step_ms(best);
  int64_t combinations = 1;
  for (int s = 0; s < stages && combinations <= kExhaustiveDelayCombinations; ++s) {
    combinations *= bounds[s] + 2;  // kWholeBackward, 0, ..., bounds[s]
  }
  if (combinations <= kExhaustiveDelayCombinations) {
    // Counting down from the bounds, as an odometer whose digits run from bounds[s] to -1.
    std::vector<int> delays = bounds;
    while (true) {
      int s = stages - 1;
      for (; s >= 0 && delays[s] == pipeline::kWholeBackward; --s) delays[s] = bounds[s];
      if (s < 0) break;
      --delays[s];
      const double ms = step_ms(delays);
      if (faster(ms, best_ms)) {
        best = delays;
        best_ms = ms;
      }
    }
    return best;
  }
  for (bool improved = true; improved;) {
    improved = false;
    for (int s = 0; s < stages; ++s) {
      std::vector<int> delays = best;
      for (int delay = bounds[s]; delay >= pipeline::kWholeBackward; --delay) {
        if (delay == best[s]) continue;
        delays[s] = delay;
        const double ms = step_ms(delays);
        if (faster(ms, best_ms)) {
          best = delays;
          best_ms = ms;
          improved = true;
        }
      }
    }
  }
  return best;
}

CostOptions with_fastest_weight_delays(const CostModel& model, const std::vector<int>& balance) {
  CostOptions options = model.options();
  if (options.weight_delays.empty()) options.weight_delays = fastest_weight_delays(model, balance);
  return options;
}

}  // namespace pipebal::balance
