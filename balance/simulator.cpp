// See simulator.h. Devices are advanced round-robin, each through its order as far as the
// dependencies allow, until every action has run; a full round without progress means the
// schedule deadlocks.
#include "balance/simulator.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

using pipeline::Action;
using pipeline::ActionKind;

constexpr double kNotDone = -1.0;

struct Walk {
  const pipeline::Schedule& schedule;
  const std::vector<StageDurations>& durations;
  const std::vector<double>& transfer_ms;
  std::vector<std::vector<double>> forward_end;   // [stage][micro-batch]
  std::vector<std::vector<double>> backward_end;  // [stage][micro-batch]

  // When `action` may start on `stage` as far as other stages are concerned; kNotDone if not yet.
  double ready_ms(int stage, const Action& action) const {
    const int i = action.micro_batch;
    switch (action.kind) {
      case ActionKind::kForward:
        if (stage == 0) return 0;
        if (forward_end[stage - 1][i] == kNotDone) return kNotDone;
        return forward_end[stage - 1][i] + transfer_ms[stage - 1];
      case ActionKind::kRecompute:
      case ActionKind::kWeight:  // after its own B, earlier in the same stage's list
        return 0;
      case ActionKind::kBackward:
        if (stage == schedule.stages - 1) return forward_end[stage][i];
        if (backward_end[stage + 1][i] == kNotDone) return kNotDone;
        return backward_end[stage + 1][i] + transfer_ms[stage];
    }
    return kNotDone;
  }

  double duration_ms(int stage, ActionKind kind) const {
    const StageDurations& d = durations[stage];
    switch (kind) {
      case ActionKind::kForward:
        return d.forward_ms;
      case ActionKind::kRecompute:
        return d.recompute_ms;
      case ActionKind::kBackward:
        return d.backward_ms;
      case ActionKind::kWeight:
        return d.weight_ms;
    }
    return 0;
  }
};

void check_sizes(const pipeline::Schedule& schedule, const std::vector<StageDurations>& durations,
                 const std::vector<double>& transfer_ms, const std::vector<StageMemory>& memory) {
  const size_t stages = static_cast<size_t>(schedule.stages);
  if (schedule.actions.size() != stages || durations.size() != stages ||
      transfer_ms.size() + 1 != stages || (!memory.empty() && memory.size() != stages)) {
    throw std::invalid_argument(fmt::format(
        "simulate: {} stages need {} action lists, {} durations, {} transfers and {} memory terms; "
        "got {}, {}, {}, {}",
        stages, stages, stages, stages - 1, stages, schedule.actions.size(), durations.size(),
        transfer_ms.size(), memory.size()));
  }
}

// Peak bytes of one stage, walking its actions in order (see StageMemory).
int64_t peak_bytes(const pipeline::Schedule& schedule, int stage, const StageMemory& memory) {
  const bool split = schedule.splits(stage);
  int64_t held = 0;
  int64_t peak = 0;
  for (const Action& action : schedule.actions[stage]) {
    const bool checkpointed =
        pipeline::is_checkpointed(schedule.checkpoint, action.micro_batch, schedule.chunks);
    switch (action.kind) {
      case ActionKind::kForward:
        held += memory.input_bytes + (checkpointed ? 0 : memory.activation_bytes);
        break;
      case ActionKind::kRecompute:
        held += memory.activation_bytes;
        break;
      case ActionKind::kBackward:  // a split one keeps the input for W
        peak = std::max(peak, held + memory.backward_bytes);
        held += split ? memory.weight_bytes - memory.activation_bytes
                      : -(memory.input_bytes + memory.activation_bytes);
        break;
      case ActionKind::kWeight:
        peak = std::max(peak, held - memory.weight_bytes + memory.weight_run_bytes);
        held -= memory.weight_bytes + memory.input_bytes;
        break;
    }
    peak = std::max(peak, held);
  }
  return memory.fixed_bytes + peak;
}

}  // namespace

SimulationResult simulate(const pipeline::Schedule& schedule,
                          const std::vector<StageDurations>& durations,
                          const std::vector<double>& transfer_ms,
                          const std::vector<StageMemory>& memory,
                          const std::vector<double>& finish_ms) {
  check_sizes(schedule, durations, transfer_ms, memory);
  if (!finish_ms.empty() && finish_ms.size() != durations.size()) {
    throw std::invalid_argument(fmt::format("simulate: {} finishing times for {} stages",
                                            finish_ms.size(), durations.size()));
  }
  const int stages = schedule.stages;
  Walk walk{
      schedule, durations, transfer_ms,
      std::vector<std::vector<double>>(stages, std::vector<double>(schedule.chunks, kNotDone)),
      std::vector<std::vector<double>>(stages, std::vector<double>(schedule.chunks, kNotDone))};

  SimulationResult result;
  result.busy_ms.assign(stages, 0.0);
  result.peak_bytes.assign(stages, 0);
  result.timeline.resize(stages);
  const int devices = schedule.devices();
  std::vector<double> device_free_ms(devices, 0.0);
  std::vector<size_t> next(devices, 0);  // position in each device's order
  size_t remaining = 0;
  for (const auto& order : schedule.device_order) remaining += order.size();

  bool progress = true;
  while (remaining > 0 && progress) {
    progress = false;
    for (int d = 0; d < devices; ++d) {
      const auto& order = schedule.device_order[d];
      for (; next[d] < order.size(); ++next[d]) {
        const int s = order[next[d]].stage;
        const Action& action = schedule.actions[s][order[next[d]].index];
        const double ready = walk.ready_ms(s, action);
        if (ready == kNotDone) break;
        TimedAction timed{s, action, std::max(device_free_ms[d], ready), 0};
        timed.end_ms = timed.start_ms + walk.duration_ms(s, action.kind);
        device_free_ms[d] = timed.end_ms;
        result.busy_ms[s] += timed.end_ms - timed.start_ms;
        if (action.kind == ActionKind::kForward)
          walk.forward_end[s][action.micro_batch] = timed.end_ms;
        if (action.kind == ActionKind::kBackward)
          walk.backward_end[s][action.micro_batch] = timed.end_ms;
        result.timeline[s].push_back(timed);
        --remaining;
        progress = true;
      }
    }
  }
  if (remaining > 0) {
    for (int d = 0; d < devices; ++d) {
      if (next[d] == schedule.device_order[d].size()) continue;
      const pipeline::DeviceStep& step = schedule.device_order[d][next[d]];
      const Action& action = schedule.actions[step.stage][step.index];
      throw std::logic_error(fmt::format("simulate: schedule deadlocks at stage {}, action {}{}",
                                         step.stage, pipeline::to_string(action.kind),
                                         action.micro_batch));
    }
  }

  double busy_total_ms = 0;
  for (int s = 0; s < stages; ++s) {
    const double end_ms = result.timeline[s].empty() ? 0.0 : result.timeline[s].back().end_ms;
    result.step_ms = std::max(result.step_ms, end_ms + (finish_ms.empty() ? 0.0 : finish_ms[s]));
    busy_total_ms += result.busy_ms[s];
    if (!memory.empty()) result.peak_bytes[s] = peak_bytes(schedule, s, memory[s]);
  }
  if (result.step_ms > 0) {
    result.bubble_fraction = 1.0 - busy_total_ms / (devices * result.step_ms);
  }
  return result;
}

}  // namespace pipebal::balance
