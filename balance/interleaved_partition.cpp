// See interleaved_partition.h.
#include "pipebal/balance/interleaved_partition.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/balance/dp_partition.h"
#include "pipebal/balance/plan.h"
#include "pipebal/common/format_bytes.h"

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

enum class Fit { kFits, kNone, kUnknown };  // kUnknown: the search stopped at its node limit

// Whether a balance fits the caps: dp's per-stage balance fails when a stage alone exceeds its
// device's cap, the search from it when the stages of a device together do.
Fit fitting_search(const CostModel& model, int64_t node_limit, InterleavedSearch* found) {
  std::vector<int> start;
  try {
    start = dp_partition(model);
  } catch (const std::invalid_argument&) {  // dp's only refusal: no stage fits alone
    return Fit::kNone;
  }
  Search search(model, node_limit);
  search.run(start);
  const InterleavedSearch& result = search.result();
  if (!result.balance.empty()) {
    if (found) *found = result;
    return Fit::kFits;
  }
  return result.exhaustive ? Fit::kNone : Fit::kUnknown;
}

CostModel with_cap(const CostModel& model, int64_t cap_bytes) {
  CostOptions options = model.options();
  options.memory_caps_bytes = {cap_bytes};
  return model.with_options(options);
}

struct CapFound {
  int64_t bytes = 0;     // 0: none found
  bool smallest = true;  // false: a search stopped at its limit, a smaller cap may fit
};

// The smallest memory cap, the same on every device, with which the search finds a balance
// that fits. With searches that finish, whether a balance fits only grows with the cap, so a
// bisection between a cap too small for one stage alone and the fastest balance's own peak (or
// that doubled, up to four times) finds it. Each probe's search is bounded (kProbeNodes), and a
// probe that stops at its bound counts as not fitting: the cap found then fits, but may not be
// the smallest. None when even the doubled peaks do not fit.
CapFound smallest_fitting_cap(const CostModel& model) {
  constexpr int64_t kProbeNodes = 200'000;
  CapFound cap;
  CostOptions unlimited = model.options();
  unlimited.memory_caps_bytes.clear();
  const CostModel free_model = model.with_options(unlimited);
  InterleavedSearch fastest;
  if (fitting_search(free_model, kProbeNodes, &fastest) != Fit::kFits) return cap;
  const std::vector<int64_t> peaks =
      make_plan(free_model, fastest.balance, "dp").device_timed_memory_bytes();
  int64_t fits = std::max<int64_t>(*std::max_element(peaks.begin(), peaks.end()), 1);
  const auto probe = [&](int64_t bytes) {
    const Fit fit = fitting_search(with_cap(model, bytes), kProbeNodes, nullptr);
    if (fit == Fit::kUnknown) cap.smallest = false;
    return fit == Fit::kFits;
  };
  for (int doubled = 0; !probe(fits); ++doubled) {
    if (doubled == 4 || fits > kUnlimitedBytes / 2) return cap;
    fits *= 2;
  }
  int64_t too_small = std::max<int64_t>(smallest_feasible_memory_cap(model) - 1, 0);
  while (fits - too_small > 1) {
    const int64_t mid = too_small + (fits - too_small) / 2;
    (probe(mid) ? fits : too_small) = mid;
  }
  cap.bytes = fits;
  return cap;
}

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

InterleavedSearch interleaved_dp_partition(const CostModel& model) {
  if (model.schedule().kind != pipeline::ScheduleKind::kInterleaved) {
    throw std::invalid_argument("interleaved_dp_partition: the cost model's schedule is " +
                                pipeline::to_string(model.schedule().kind));
  }
  InterleavedSearch found;
  const Fit fit = fitting_search(model, kSearchNodes, &found);
  if (fit == Fit::kFits) return found;
  std::string caps;
  for (int d = 0; d < model.schedule().devices(); ++d) {
    caps += (d > 0 ? ", " : "") + format_bytes(model.memory_cap_bytes(d));
  }
  const std::string what = fmt::format(
      "no partition of {} layers into {} stages, {} on each of {} devices, fits the devices' "
      "memory caps ({}; a device holds its stages' memory at once)",
      model.layer_count(), model.stage_count(), model.schedule().virtual_stages,
      model.schedule().devices(), caps);
  if (fit == Fit::kUnknown) {
    throw std::invalid_argument(
        fmt::format("{} within the {} prefixes searched", what, kSearchNodes));
  }
  const CapFound cap = smallest_fitting_cap(model);
  if (cap.bytes == 0) throw std::invalid_argument(what);
  throw std::invalid_argument(
      fmt::format("{}; {} cap on every device that one fits is {} ({} bytes)", what,
                  cap.smallest ? "the smallest" : "a", format_bytes(cap.bytes), cap.bytes));
}

}  // namespace pipebal::balance
