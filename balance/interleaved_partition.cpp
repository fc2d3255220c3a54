// See interleaved_partition.h.
#include "balance/interleaved_partition.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "balance/plan.h"

namespace pipebal::balance {
namespace {

class Search {
 public:
  Search(const CostModel& model, int64_t node_limit)
      : model_(model),
        stages_(model.stage_count()),
        devices_(model.schedule().devices()),
        layers_(model.layer_count()),
        node_limit_(node_limit),
        load_(devices_, 0.0),
        held_(devices_, 0),
        balance_(stages_, 0) {
    const pipeline::Schedule& schedule = model.schedule();
    for (int i = 0; i < schedule.chunks; ++i) {
      if (pipeline::is_checkpointed(schedule.checkpoint, i, schedule.chunks)) ++checkpointed_;
    }
  }

  void run(const std::vector<int>& start) {
    // The start is the best known if its devices fit their memory.
    if (make_plan(model_, start, "dp").fits_memory()) {
      result_.balance = start;
      result_.step_ms = simulate_balance(model_, start, model_.options().chunks).step_ms;
    }
    visit(0, 0);
  }

  const InterleavedSearch& result() const { return result_; }

 private:
  // A device's busy time for one stage over the whole step: every micro-batch's F and B, and R
  // for the checkpointed ones.
  double busy_ms(int stage, int first, int end) const {
    const StageDurations d = model_.durations(stage, first, end);
    return model_.options().chunks * (d.forward_ms + d.backward_ms) +
           checkpointed_ * d.recompute_ms;
  }

  void visit(int stage, int first) {
    if (++result_.nodes > node_limit_) {
      result_.exhaustive = false;
      return;
    }
    if (stage == stages_) {
      const double step = simulate_balance(model_, balance_, model_.options().chunks).step_ms;
      // The bound above counts what the stages hold; as the start, a result must also fit with
      // the messages waiting on its timeline.
      if (step < result_.step_ms && make_plan(model_, balance_, "dp").fits_memory()) {
        result_.step_ms = step;
        result_.balance = balance_;
      }
      return;
    }
    const int device = stage % devices_;
    const int remaining_stages = stages_ - stage - 1;
    // The last stage takes every layer left.
    for (int end = remaining_stages == 0 ? layers_ : first + 1; end + remaining_stages <= layers_;
         ++end) {
      const double busy = busy_ms(stage, first, end);
      const int64_t bytes = model_.memory_bytes(stage, first, end);
      // Longer stages only add work and memory to this device: no later end can do better.
      if (load_[device] + busy >= result_.step_ms) break;
      if (__int128{held_[device]} + bytes > model_.memory_cap_bytes(stage)) break;
      load_[device] += busy;
      held_[device] += bytes;
      balance_[stage] = end - first;
      visit(stage + 1, end);
      load_[device] -= busy;
      held_[device] -= bytes;
      if (!result_.exhaustive) return;
    }
  }

  const CostModel& model_;
  const int stages_;
  const int devices_;
  const int layers_;
  const int64_t node_limit_;
  int checkpointed_ = 0;
  std::vector<double> load_;   // busy time per device of the stages placed so far
  std::vector<int64_t> held_;  // and their memory, which the device's cap bounds
  std::vector<int> balance_;   // of the prefix being visited
  InterleavedSearch result_{{}, std::numeric_limits<double>::infinity(), 0, true};
};

}  // namespace

InterleavedSearch interleaved_partition(const CostModel& model, const std::vector<int>& start,
                                        int64_t node_limit) {
  if (model.schedule().kind != pipeline::ScheduleKind::kInterleaved) {
    throw std::invalid_argument("interleaved_partition: the cost model's schedule is " +
                                pipeline::to_string(model.schedule().kind));
  }
  pipeline::check_balance(start, model.layer_count(), model.stage_count());
  Search search(model, node_limit);
  search.run(start);
  const InterleavedSearch& result = search.result();
  if (result.balance.empty()) {
    throw std::invalid_argument(fmt::format(
        "no partition of {} layers into {} stages, {} on each of {} devices, fits the devices' "
        "memory caps{}",
        model.layer_count(), model.stage_count(), model.schedule().virtual_stages,
        model.schedule().devices(),
        result.exhaustive ? "" : fmt::format(" within the {} prefixes searched", result.nodes)));
  }
  return result;
}

}  // namespace pipebal::balance
