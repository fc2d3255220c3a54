// See simulator.h. Devices are advanced round-robin, each through its order as far as the
// dependencies allow, until every action has run; a full round without progress means the
// schedule deadlocks.
#include "pipebal/balance/simulator.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

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
  // [stage][micro-batch]
  std::vector<std::vector<double>> forward_start, forward_end, backward_start, backward_end;

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

// The bytes of the messages one stage sent that wait for their receiver, queried at
// nondecreasing times. A message waits from the end of the action that made it until the start
// of the receiver's action that takes it: not at all when the receiver was already waiting. An
// uncheckpointed F's output adds nothing: the stage keeps it anyway, to back-propagate from, in
// the activations it holds until the B.
class WaitingMessages {
 public:
  WaitingMessages(const Walk& walk, int stage, const StageMemory& memory) {
    const pipeline::Schedule& schedule = walk.schedule;
    const int last = schedule.stages - 1;
    for (int i = 0; i < schedule.chunks; ++i) {
      if (stage < last && pipeline::is_checkpointed(schedule.checkpoint, i, schedule.chunks)) {
        add(walk.forward_end[stage][i], walk.forward_start[stage + 1][i], memory.output_bytes);
      }
      if (stage > 0) {
        add(walk.backward_end[stage][i], walk.backward_start[stage - 1][i],
            memory.input_grad_bytes);
      }
    }
    std::sort(events_.begin(), events_.end());
  }

  __int128 at(double time_ms) {
    for (; next_ < events_.size() && events_[next_].first <= time_ms; ++next_) {
      bytes_ += events_[next_].second;
    }
    return bytes_;
  }

 private:
  void add(double sent_ms, double taken_ms, int64_t bytes) {
    if (taken_ms <= sent_ms || bytes == 0) return;
    events_.emplace_back(sent_ms, bytes);
    events_.emplace_back(taken_ms, -bytes);
  }

  std::vector<std::pair<double, int64_t>> events_;  // (time, bytes added or taken away)
  size_t next_ = 0;
  __int128 bytes_ = 0;
};

struct StagePeaks {
  int64_t own = 0;    // what its actions hold
  int64_t timed = 0;  // and its sent messages waiting, at each moment of its timeline
};

// One stage's peaks, walking its actions in order (see StageMemory) along `timeline`, its
// simulated actions.
StagePeaks stage_peaks(const pipeline::Schedule& schedule, int stage, const StageMemory& memory,
                       const std::vector<TimedAction>& timeline, WaitingMessages& waiting) {
  const bool split = schedule.splits(stage);
  // Wide, saturated at the end: byte counts read from a file may be absurd.
  __int128 held = 0;
  __int128 own = 0;
  __int128 timed = 0;
  const auto peak_at = [&](__int128 bytes, __int128 waiting_bytes) {
    own = std::max(own, bytes);
    timed = std::max(timed, bytes + waiting_bytes);
  };
  for (size_t k = 0; k < schedule.actions[stage].size(); ++k) {
    const Action& action = schedule.actions[stage][k];
    // Messages only leave while an action runs, so the most wait at its start.
    const __int128 waiting_at_start = waiting.at(timeline[k].start_ms);
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
        peak_at(held + memory.backward_bytes, waiting_at_start);
        held += split ? memory.weight_bytes - memory.activation_bytes
                      : -(memory.input_bytes + memory.activation_bytes);
        break;
      case ActionKind::kWeight:
        peak_at(held - memory.weight_bytes + memory.weight_run_bytes, waiting_at_start);
        held -= memory.weight_bytes + memory.input_bytes;
        break;
    }
    peak_at(held, waiting.at(timeline[k].end_ms));
  }
  const auto total = [&memory](__int128 peak) {
    constexpr int64_t kMost = std::numeric_limits<int64_t>::max();
    const __int128 bytes = memory.fixed_bytes + peak;
    return bytes >= kMost ? kMost : static_cast<int64_t>(bytes);
  };
  return {total(own), total(timed)};
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
  const std::vector<std::vector<double>> not_done(stages,
                                                  std::vector<double>(schedule.chunks, kNotDone));
  Walk walk{schedule, durations, transfer_ms, not_done, not_done, not_done, not_done};

  SimulationResult result;
  result.busy_ms.assign(stages, 0.0);
  result.peak_bytes.assign(stages, 0);
  result.timed_peak_bytes.assign(stages, 0);
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
        if (action.kind == ActionKind::kForward) {
          walk.forward_start[s][action.micro_batch] = timed.start_ms;
          walk.forward_end[s][action.micro_batch] = timed.end_ms;
        }
        if (action.kind == ActionKind::kBackward) {
          walk.backward_start[s][action.micro_batch] = timed.start_ms;
          walk.backward_end[s][action.micro_batch] = timed.end_ms;
        }
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

  // Per device: its stages' busy time, its last action's end, and their finishing work, done
  // one stage after another once the device's last action has ended.
  std::vector<double> device_busy_ms(devices, 0.0), device_finish_ms(devices, 0.0),
      device_end_ms(devices, 0.0);
  for (int s = 0; s < stages; ++s) {
    const int d = schedule.device_of(s);
    const double end_ms = result.timeline[s].empty() ? 0.0 : result.timeline[s].back().end_ms;
    device_end_ms[d] = std::max(device_end_ms[d], end_ms);
    device_finish_ms[d] += finish_ms.empty() ? 0.0 : finish_ms[s];
    device_busy_ms[d] += result.busy_ms[s];
    if (memory.empty()) continue;
    WaitingMessages waiting(walk, s, memory[s]);
    const StagePeaks peaks = stage_peaks(schedule, s, memory[s], result.timeline[s], waiting);
    result.peak_bytes[s] = peaks.own;
    result.timed_peak_bytes[s] = peaks.timed;
  }
  for (int d = 0; d < devices; ++d) {
    result.step_ms = std::max(result.step_ms, device_end_ms[d] + device_finish_ms[d]);
  }
  if (result.step_ms > 0) {
    // The bubble is what the schedule leaves idle: finishing work is no bubble (one stage with
    // one micro-batch has none).
    double occupied_ms = 0;
    for (int d = 0; d < devices; ++d)
      occupied_ms += std::min(result.step_ms, device_busy_ms[d] + device_finish_ms[d]);
    result.bubble_fraction = 1.0 - occupied_ms / (devices * result.step_ms);
  }
  return result;
}

}  // namespace pipebal::balance
