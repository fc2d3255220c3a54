// Generation of GPipe, 1F1B, interleaved 1F1B and zero-bubble H1 action lists; see schedule.h.
#include "pipebal/pipeline/schedule.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace pipebal::pipeline {
namespace {

void append_backward(std::vector<Action>& list, int micro_batch, const Schedule& schedule) {
  if (is_checkpointed(schedule.checkpoint, micro_batch, schedule.chunks)) {
    list.push_back({ActionKind::kRecompute, micro_batch});
  }
  list.push_back({ActionKind::kBackward, micro_batch});
}

// Fill-drain: every forward, then the backwards in reverse order, as autograd runs them in
// GPipe (the last micro-batch's backward can start as soon as its forward is done).
std::vector<Action> gpipe_stage(const Schedule& schedule) {
  std::vector<Action> list;
  for (int i = 0; i < schedule.chunks; ++i) list.push_back({ActionKind::kForward, i});
  for (int i = schedule.chunks - 1; i >= 0; --i) append_backward(list, i, schedule);
  return list;
}

// 1F1B: `stages - stage - 1` warm-up forwards, then alternate one forward and one backward,
// then drain the remaining backwards. Backwards run in micro-batch order.
std::vector<Action> one_f_one_b_stage(const Schedule& schedule, int stage) {
  const int m = schedule.chunks;
  const int warmup = std::min(schedule.stages - stage - 1, m);
  std::vector<Action> list;
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward)
    list.push_back({ActionKind::kForward, next_forward});
  while (next_forward < m) {
    list.push_back({ActionKind::kForward, next_forward++});
    append_backward(list, next_backward++, schedule);
  }
  while (next_backward < m) append_backward(list, next_backward++, schedule);
  return list;
}

// Interleaved 1F1B (Narayanan et al., SC'21; Megatron-LM's order): device d of p runs its
// V stages' forwards round-robin in rounds of p micro-batches, `warmup` of them before the first
// backward (fewer the later the device: its first backward's inputs come back sooner), then
// one forward and one backward in turn, then the remaining backwards; backwards visit the stages
// in reverse. Each action goes on its stage's list; the device's order interleaves the lists.
// Appends an action to its stage's list and to its device's order.
void place_forward(Schedule& schedule, int stage, int micro_batch) {
  const int device = schedule.device_of(stage);
  schedule.device_order[device].push_back(
      {stage, static_cast<int>(schedule.actions[stage].size())});
  schedule.actions[stage].push_back({ActionKind::kForward, micro_batch});
}

// Appends a backward (after its recompute when checkpointed) likewise.
void place_backward(Schedule& schedule, int stage, int micro_batch) {
  const int device = schedule.device_of(stage);
  std::vector<Action>& list = schedule.actions[stage];
  const size_t before = list.size();
  append_backward(list, micro_batch, schedule);
  for (size_t k = before; k < list.size(); ++k) {
    schedule.device_order[device].push_back({stage, static_cast<int>(k)});
  }
}

void interleaved_device(Schedule& schedule, int device) {
  const int p = schedule.devices();
  const int v = schedule.virtual_stages;
  const int m = schedule.chunks;
  if (m == 1) {
    // One micro-batch: forward through the device's stages in turn, then back.
    for (int round = 0; round < v; ++round) place_forward(schedule, round * p + device, 0);
    for (int round = v - 1; round >= 0; --round) place_backward(schedule, round * p + device, 0);
    return;
  }
  const int total = m * v;
  const int warmup = m == p ? total : std::min((p - device - 1) * 2 + (v - 1) * p, total);
  const auto place = [&](int k, bool forward) {
    const int round = k % (p * v) / p;
    const int stage = (forward ? round : v - 1 - round) * p + device;
    const int micro_batch = k / (p * v) * p + k % p;
    if (forward) {
      place_forward(schedule, stage, micro_batch);
    } else {
      place_backward(schedule, stage, micro_batch);
    }
  };
  for (int k = 0; k < warmup; ++k) place(k, true);
  for (int k = 0; k < total - warmup; ++k) {
    place(warmup + k, true);
    place(k, false);
  }
  for (int k = total - warmup; k < total; ++k) place(k, false);
}

// Zero-bubble H1 (Qi et al., ICLR 2024, figure 3): 1F1B's forwards and B's, with stage s
// running the W of a micro-batch weight_delays[s] B's later than its B, then the W's left.
// The W's so fill the time a 1F1B stage waits for gradients: with F, B and W of one unit each
// and H1's delays (s), the step is 3 m + p - 1 units against 1F1B's 3 (m + p - 1). A stage
// holds a micro-batch's activations from its F to its W: with H1's delays at most min(p, m) at
// once, the peak of 1F1B's first stage.
std::vector<Action> zero_bubble_h1_stage(const Schedule& schedule, int stage) {
  const int m = schedule.chunks;
  const int warmup = std::min(schedule.stages - stage - 1, m);
  const int delay = schedule.weight_delays[stage];
  if (delay == kWholeBackward) return one_f_one_b_stage(schedule, stage);
  std::vector<Action> list;
  int next_forward = 0, next_backward = 0, next_weight = 0;
  const auto backward_then_due_weight = [&] {
    append_backward(list, next_backward++, schedule);
    if (next_backward - 1 - delay >= next_weight)
      list.push_back({ActionKind::kWeight, next_weight++});
  };
  for (; next_forward < warmup; ++next_forward)
    list.push_back({ActionKind::kForward, next_forward});
  while (next_forward < m) {
    list.push_back({ActionKind::kForward, next_forward++});
    backward_then_due_weight();
  }
  while (next_backward < m) backward_then_due_weight();
  while (next_weight < m) list.push_back({ActionKind::kWeight, next_weight++});
  return list;
}

}  // namespace

bool is_checkpointed(CheckpointMode mode, int micro_batch, int chunks) {
  switch (mode) {
    case CheckpointMode::kAlways:
      return true;
    case CheckpointMode::kExceptLast:
      return micro_batch != chunks - 1;
    case CheckpointMode::kNever:
      return false;
  }
  return false;
}

std::vector<int> h1_weight_delays(int stages, int chunks) {
  std::vector<int> delays;
  for (int s = 0; s < stages; ++s) delays.push_back(std::min(s, chunks));
  return delays;
}

Schedule make_schedule(ScheduleKind kind, int stages, int chunks, CheckpointMode checkpoint,
                       int virtual_stages, const std::vector<int>& weight_delays) {
  if (stages < 1) {
    throw std::invalid_argument("schedule: stages must be at least 1, got " +
                                std::to_string(stages));
  }
  if (chunks < 1) {
    throw std::invalid_argument("schedule: chunks must be at least 1, got " +
                                std::to_string(chunks));
  }
  if (chunks > kMaxChunks || int64_t{stages} * chunks > kMaxScheduleCells) {
    throw std::invalid_argument(
        "schedule: " + std::to_string(stages) + " stages x " + std::to_string(chunks) +
        " micro-batches is beyond what pipebal plans (at most " + std::to_string(kMaxChunks) +
        " micro-batches and " + std::to_string(kMaxScheduleCells) + " stage-micro-batch pairs)");
  }
  if (kind != ScheduleKind::kInterleaved && virtual_stages != 1) {
    throw std::invalid_argument("schedule: " + to_string(kind) +
                                " runs one stage per device; stages per device (" +
                                std::to_string(virtual_stages) + ") go with interleaved");
  }
  if (kind == ScheduleKind::kInterleaved) {
    if (virtual_stages < 1 || stages % virtual_stages != 0) {
      throw std::invalid_argument("schedule: interleaved needs the stages (" +
                                  std::to_string(stages) + ") to be a multiple of the stages per " +
                                  "device (" + std::to_string(virtual_stages) + ")");
    }
    if (chunks > 1 && chunks % (stages / virtual_stages) != 0) {
      throw std::invalid_argument("schedule: interleaved needs the micro-batches (" +
                                  std::to_string(chunks) + ") to be a multiple of the devices (" +
                                  std::to_string(stages / virtual_stages) + ")");
    }
  }
  if (!weight_delays.empty()) {
    if (kind != ScheduleKind::kZeroBubbleH1) {
      throw std::invalid_argument("schedule: W delays go with zb-h1, not " + to_string(kind));
    }
    if (static_cast<int>(weight_delays.size()) != stages) {
      throw std::invalid_argument("schedule: " + std::to_string(weight_delays.size()) +
                                  " W delays for " + std::to_string(stages) +
                                  " stages; give one per stage");
    }
    for (size_t s = 0; s < weight_delays.size(); ++s) {
      if (weight_delays[s] < kWholeBackward || weight_delays[s] > kMaxChunks) {
        throw std::invalid_argument("schedule: stage " + std::to_string(s) + "'s W delay is " +
                                    std::to_string(weight_delays[s]) + ", expected 0 to " +
                                    std::to_string(kMaxChunks) +
                                    " micro-batches, or -1 (the whole backward in B)");
      }
    }
  }
  Schedule schedule;
  schedule.kind = kind;
  if (kind == ScheduleKind::kZeroBubbleH1) {
    schedule.weight_delays =
        weight_delays.empty() ? h1_weight_delays(stages, chunks) : weight_delays;
    // A delay of the micro-batches or more runs every W after the last B.
    for (int& delay : schedule.weight_delays) delay = std::min(delay, chunks);
  }
  schedule.checkpoint = checkpoint;
  schedule.stages = stages;
  schedule.virtual_stages = virtual_stages;
  schedule.chunks = chunks;
  schedule.actions.resize(stages);
  schedule.device_order.resize(schedule.devices());
  for (int d = 0; d < schedule.devices(); ++d) {
    if (kind == ScheduleKind::kInterleaved) {
      interleaved_device(schedule, d);
      continue;
    }
    if (kind == ScheduleKind::kGPipe) schedule.actions[d] = gpipe_stage(schedule);
    if (kind == ScheduleKind::kOneFOneB) schedule.actions[d] = one_f_one_b_stage(schedule, d);
    if (kind == ScheduleKind::kZeroBubbleH1)
      schedule.actions[d] = zero_bubble_h1_stage(schedule, d);
    for (int k = 0; k < static_cast<int>(schedule.actions[d].size()); ++k) {
      schedule.device_order[d].push_back({d, k});
    }
  }
  return schedule;
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
  }
  return "gpipe";
}

std::string to_string(CheckpointMode mode) {
  switch (mode) {
    case CheckpointMode::kAlways:
      return "always";
    case CheckpointMode::kExceptLast:
      return "except_last";
    case CheckpointMode::kNever:
      return "never";
  }
  return "never";
}

std::string to_string(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kRecompute:
      return "R";
    case ActionKind::kBackward:
      return "B";
    case ActionKind::kWeight:
      return "W";
  }
  return "F";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  if (name == "interleaved") return ScheduleKind::kInterleaved;
  if (name == "zb-h1") return ScheduleKind::kZeroBubbleH1;
  throw std::invalid_argument("unknown schedule '" + name +
                              "' (valid: gpipe, 1f1b, interleaved, zb-h1)");
}

ActionKind parse_action_kind(const std::string& name) {
  if (name == "F") return ActionKind::kForward;
  if (name == "R") return ActionKind::kRecompute;
  if (name == "B") return ActionKind::kBackward;
  if (name == "W") return ActionKind::kWeight;
  throw std::invalid_argument("unknown action '" + name + "' (valid: F, R, B, W)");
}

CheckpointMode parse_checkpoint_mode(const std::string& name) {
  if (name == "always") return CheckpointMode::kAlways;
  if (name == "except_last") return CheckpointMode::kExceptLast;
  if (name == "never") return CheckpointMode::kNever;
  throw std::invalid_argument("unknown checkpoint mode '" + name +
                              "' (valid: always, except_last, never)");
}

namespace {

std::string joined(const std::vector<int>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

}  // namespace

void check_balance(const std::vector<int>& balance, size_t layers, int stages) {
  if (balance.empty()) {
    throw std::invalid_argument("balance is empty: give layers per stage, e.g. 3,3,2");
  }
  if (stages > 0 && static_cast<int>(balance.size()) != stages) {
    throw std::invalid_argument("balance " + joined(balance) + " has " +
                                std::to_string(balance.size()) +
                                (balance.size() == 1 ? " entry for " : " entries for ") +
                                std::to_string(stages) + " stages");
  }
  int64_t total = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    if (balance[s] < 1) {
      throw std::invalid_argument("balance " + joined(balance) + ": stage " + std::to_string(s) +
                                  " has " + std::to_string(balance[s]) +
                                  " layers; every stage needs at least one");
    }
    total += balance[s];
  }
  if (total != static_cast<int64_t>(layers)) {
    throw std::invalid_argument("balance " + joined(balance) + " sums to " + std::to_string(total) +
                                ", but the model has " + std::to_string(layers) + " layers");
  }
}

}  // namespace pipebal::pipeline
