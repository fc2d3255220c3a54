// See dp_partition.h.
//
// The bottleneck is found by a parametric search: probe(T) decides in O(k n) whether every stage
// can cost at most T. For a stage ending at layer j, compute time falls as its start moves right
// and the transfer depends on j only, so the latest admissible start is the best one; memory only
// grows with the end for a fixed start (the stage input depends on the start, so memory is not
// monotone in the start), hence each start has a furthest end `limit`, fixed for the whole search.
// A stack of starts sweeps j upward and yields the latest start whose limit still covers j.
// A probe keeps only which ends each stage count reached, one bit each: that start is a function
// of them, so the partition is recovered by walking back (k n bits, not k n ints: 32 MiB rather
// than 1 GiB at the cost model's 2^28 bound). The tie-break on unequal devices or links
// (smallest_sum_partition) still keeps a table of starts, and capped stages their limits.
// A feasible probe lowers the upper bound to the bottleneck actually achieved; an infeasible one
// raises the lower bound to the smallest cost it rejected, as no threshold below that changes any
// comparison. The two meet at the exact optimum. The search starts from a lower bound (the work
// spread over the devices' summed speed), which on long models lies within a fraction of a percent
// of the optimum, and gallops up from it rather than bisecting down from the first, lopsided
// partition: 5000 layers on 32 stages take 7 to 9 probes instead of 17.
#include "pipebal/balance/dp_partition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/balance/units.h"

namespace pipebal::balance {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A stage's memory: the model's, or, where an alternative model may run the stage instead (zb-h1
// whose stages may keep the backward whole), the lesser of the two. Each grows with the end for
// a fixed start, so the lesser does too.
struct ExtentMemory {
  const CostModel& model;
  const CostModel* alternative = nullptr;

  int64_t operator()(int s, int first, int end) const {
    const int64_t bytes = model.memory_bytes(s, first, end);
    return alternative ? std::min(bytes, alternative->memory_bytes(s, first, end)) : bytes;
  }
};

// Everything a probe needs about the instance, computed once.
struct Instance {
  const CostModel& model;
  int n = 0;
  int k = 0;
  // limit[s][a]: the furthest end a stage s starting at a may have within its memory cap;
  // a itself when not even one layer fits. Empty for a stage without a cap: every end fits (the
  // common case then makes no table of k x n entries, 1 GiB at the 2^28 bound).
  std::vector<std::vector<int>> limit;

  Instance(const ExtentMemory& memory, const std::vector<int64_t>& caps_bytes)
      : model(memory.model), n(model.layer_count()), k(model.stage_count()), limit(k) {
    for (int s = 0; s < k; ++s) {
      if (caps_bytes[s] == kUnlimitedBytes) continue;
      limit[s].assign(n + 1, 0);
      // Stage s starts at or after s and leaves a layer for each later stage.
      for (int a = s; a <= n - (k - s); ++a) {
        limit[s][a] = furthest_end(memory, s, a, caps_bytes[s]);
      }
    }
  }

  int furthest_end(const ExtentMemory& memory, int s, int a, int64_t cap_bytes) const {
    int lo = a;  // known to fit (an empty extent always does)
    int hi = n + 1;
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (memory(s, a, mid) <= cap_bytes ? lo : hi) = mid;
    }
    return lo;
  }

  int limit_of(int s, int a) const { return limit[s].empty() ? n : limit[s][a]; }
  int first_end(int s) const { return s + 1; }
  int last_end(int s) const { return n - (k - 1 - s); }
};

std::vector<int64_t> model_caps(const CostModel& model) {
  std::vector<int64_t> caps(model.stage_count());
  for (int s = 0; s < model.stage_count(); ++s) caps[s] = model.memory_cap_bytes(s);
  return caps;
}

// choice[s][j] = start of stage s when it ends at j; walks back from the last stage.
std::vector<int> unwind(const std::vector<std::vector<int>>& choice, int n) {
  const int k = static_cast<int>(choice.size());
  std::vector<int> balance(k);
  int end = n;
  for (int s = k - 1; s >= 0; --s) {
    const int first = choice[s][end];
    balance[s] = end - first;
    end = first;
  }
  return balance;
}

double bottleneck_ms(const CostModel& model, const std::vector<int>& balance) {
  double worst = 0;
  int first = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    worst = std::max(worst, model.cost_ms(static_cast<int>(s), first, first + balance[s]));
    first += balance[s];
  }
  return worst;
}

struct Probe {
  bool feasible = false;
  double next_threshold_ms = kInfinity;  // the smallest stage cost the probe rejected
};

// Which ends each stage count can reach within a threshold, one bit per end: (k + 1) x (n + 1)
// bits, where a table of the start chosen for every end would take 32 times as much.
class ReachedEnds {
 public:
  ReachedEnds(int stages, int layers)
      : words_((static_cast<size_t>(layers) + 1 + 63) / 64),
        bits_(static_cast<size_t>(stages + 1) * words_, 0) {}

  // After `stages` stages, can the last one end at layer `end`?
  bool test(int stages, int end) const { return (row(stages)[end / 64] >> (end % 64)) & 1; }
  void set(int stages, int end) { row(stages)[end / 64] |= uint64_t{1} << (end % 64); }
  void clear(int stages) { std::fill_n(row(stages), words_, 0); }

 private:
  uint64_t* row(int stages) { return bits_.data() + static_cast<size_t>(stages) * words_; }
  const uint64_t* row(int stages) const {
    return bits_.data() + static_cast<size_t>(stages) * words_;
  }

  size_t words_;
  std::vector<uint64_t> bits_;
};

class BottleneckSearch {
 public:
  explicit BottleneckSearch(const Instance& instance)
      : in_(instance), reached_(instance.k, instance.n) {}

  Probe probe(double threshold_ms) {
    reached_.clear(0);
    reached_.set(0, 0);
    Probe result;
    for (int s = 0; s < in_.k; ++s) {
      reached_.clear(s + 1);
      const std::vector<int>& limits = in_.limit[s];
      const auto uncapped = [this](int) { return in_.n; };
      const auto capped = [&limits](int a) { return limits[a]; };
      if (limits.empty()) {
        sweep(s, threshold_ms, uncapped, result);
      } else {
        sweep(s, threshold_ms, capped, result);
      }
    }
    result.feasible = reached_.test(in_.k, in_.n);
    return result;
  }

  // The partition the last feasible probe found: each stage's start is the one its sweep chose,
  // the latest reached start whose limit covers the end (see sweep), found again walking back.
  std::vector<int> balance() const {
    std::vector<int> balance(in_.k);
    int end = in_.n;
    for (int s = in_.k - 1; s >= 0; --s) {
      int first = end - 1;
      while (!(reached_.test(s, first) && in_.limit_of(s, first) >= end)) --first;
      balance[s] = end - first;
      end = first;
    }
    return balance;
  }

 private:
  // Stage s from every reached start: a stack of starts yields, for each end j, the latest
  // reached start a < j whose limit covers j (one pushed later was popped for a limit below
  // some end <= j), the cheapest admissible one.
  template <typename Limit>
  void sweep(int s, double threshold_ms, const Limit& limit, Probe& result) {
    stack_.clear();
    for (int j = in_.first_end(s); j <= in_.last_end(s); ++j) {
      if (reached_.test(s, j - 1) && limit(j - 1) >= j) stack_.push_back(j - 1);
      while (!stack_.empty() && limit(stack_.back()) < j) stack_.pop_back();
      if (stack_.empty()) continue;
      const double cost_ms = in_.model.cost_ms(s, stack_.back(), j);
      if (cost_ms <= threshold_ms) {
        reached_.set(s + 1, j);
      } else {
        result.next_threshold_ms = std::min(result.next_threshold_ms, cost_ms);
      }
    }
  }

  const Instance& in_;
  ReachedEnds reached_;
  std::vector<int> stack_;
};

// Range arg-min over starts with point removal: the tie-break DP's inner query.
class MinTree {
 public:
  explicit MinTree(const std::vector<double>& values) : size_(1) {
    while (size_ < static_cast<int>(values.size())) size_ *= 2;
    nodes_.assign(2 * size_, {kInfinity, -1});
    for (size_t i = 0; i < values.size(); ++i) nodes_[size_ + i] = {values[i], static_cast<int>(i)};
    for (int i = size_ - 1; i > 0; --i) nodes_[i] = std::min(nodes_[2 * i], nodes_[2 * i + 1]);
  }

  void remove(int index) {
    int i = size_ + index;
    nodes_[i] = {kInfinity, -1};
    for (i /= 2; i > 0; i /= 2) nodes_[i] = std::min(nodes_[2 * i], nodes_[2 * i + 1]);
  }

  // The smallest value in [lo, hi) and its index (-1 when none is finite).
  std::pair<double, int> min(int lo, int hi) const {
    std::pair<double, int> best{kInfinity, -1};
    for (lo += size_, hi += size_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::min(best, nodes_[lo++]);
      if (hi & 1) best = std::min(best, nodes_[--hi]);
    }
    return best;
  }

 private:
  int size_;
  std::vector<std::pair<double, int>> nodes_;
};

// Among partitions whose every stage costs at most `bottleneck_ms`, the one with the smallest sum
// of stage costs. Stage cost = time(s, 0, j) - time(s, 0, a) + transfer(j), so the best start for
// end j minimises sum_before[a] - time(s, 0, a) over the admissible starts.
std::vector<int> smallest_sum_partition(const Instance& in, double bottleneck_ms) {
  const CostModel& model = in.model;
  const int n = in.n;
  std::vector<double> sum_ms(n + 1, kInfinity);
  sum_ms[0] = 0;
  std::vector<std::vector<int>> choice(in.k, std::vector<int>(n + 1, -1));
  for (int s = 0; s < in.k; ++s) {
    std::vector<double> value(n, kInfinity);
    std::vector<std::vector<int>> expires(n + 2);
    for (int a = s; a < in.last_end(s); ++a) {
      const int limit = in.limit_of(s, a);
      if (sum_ms[a] == kInfinity || limit <= a) continue;
      value[a] = sum_ms[a] - model.time_ms(s, 0, a);
      expires[limit + 1].push_back(a);
    }
    MinTree tree(value);
    std::vector<double> next_sum_ms(n + 1, kInfinity);
    for (int j = in.first_end(s); j <= in.last_end(s); ++j) {
      for (int a : expires[j]) tree.remove(a);
      if (model.cost_ms(s, j - 1, j) > bottleneck_ms) continue;
      int lo = s - 1;  // the earliest start within the bottleneck is in (lo, j - 1]
      int hi = j - 1;
      while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        (model.cost_ms(s, mid, j) <= bottleneck_ms ? hi : lo) = mid;
      }
      const auto [best, first] = tree.min(hi, j);
      if (first < 0) continue;
      next_sum_ms[j] = best + model.time_ms(s, 0, j) + model.transfer_ms(j);
      choice[s][j] = first;
    }
    sum_ms.swap(next_sum_ms);
  }
  if (sum_ms[n] == kInfinity) {
    throw std::logic_error("dp_partition: no partition within the bottleneck it just found");
  }
  return unwind(choice, n);
}

[[noreturn]] void throw_memory_infeasible(const CostModel& model, const CostModel* alternative) {
  const int64_t needed = smallest_feasible_memory_cap(model, alternative);
  std::string caps = format_bytes(model.memory_cap_bytes(0)) + " on every stage";
  for (int s = 1; s < model.stage_count(); ++s) {
    if (model.memory_cap_bytes(s) != model.memory_cap_bytes(0)) {
      caps = format_bytes(model.memory_cap_bytes(0));
      for (int t = 1; t < model.stage_count(); ++t)
        caps += ", " + format_bytes(model.memory_cap_bytes(t));
      break;
    }
  }
  throw std::invalid_argument(fmt::format(
      "no partition of {} layers into {} stages fits the memory caps ({}); {}", model.layer_count(),
      model.stage_count(), caps,
      needed == kUnlimitedBytes
          ? fmt::format("no cap would: every partition has a stage that needs more than {}, the "
                        "most pipebal counts (are the profile's bytes and --param-scale right?)",
                        format_bytes(static_cast<double>(kUnlimitedBytes)))
          : fmt::format("the smallest cap that would work on every stage is {} ({} bytes)",
                        format_bytes(needed), needed)));
}

}  // namespace

std::vector<int> dp_partition(const CostModel& model, const CostModel* alternative) {
  const Instance instance(ExtentMemory{model, alternative}, model_caps(model));
  BottleneckSearch search(instance);
  if (!search.probe(kInfinity).feasible) throw_memory_infeasible(model, alternative);
  std::vector<int> best = search.balance();
  double upper_ms = bottleneck_ms(model, best);
  // Each stage costs at least its compute time (costs add non-negative terms to it), and some
  // stage computes at least its speed's share of the whole work.
  double speeds = 0;
  for (int s = 0; s < model.stage_count(); ++s) speeds += model.speed(s);
  const double work_ms = model.time_ms(0, 0, model.layer_count()) * model.speed(0);
  // Shaved by far more than the rounding of the sums, which could lift it past the optimum.
  double lower_ms = std::min(work_ms / speeds * (1 - 1e-9), upper_ms);
  // The galloping step above lower_ms, widened after each miss; plain bisection from 0.
  double step_ms = lower_ms > 0 ? lower_ms / 64 : kInfinity;
  while (lower_ms < upper_ms) {
    double threshold_ms = lower_ms + std::min(step_ms, (upper_ms - lower_ms) / 2);
    if (!(threshold_ms < upper_ms)) threshold_ms = lower_ms;
    const Probe probe = search.probe(threshold_ms);
    if (probe.feasible) {
      best = search.balance();
      upper_ms = bottleneck_ms(model, best);
    } else {
      lower_ms = std::min(probe.next_threshold_ms, upper_ms);
      step_ms *= 4;
    }
  }
  // On equal devices with free links every partition has the same sum of stage costs (the total
  // work), so any partition at the optimal bottleneck is also optimal for the tie-break.
  bool uniform_devices = model.options().bandwidth_bytes_per_ms == 0 ||
                         std::isinf(model.options().bandwidth_bytes_per_ms);
  for (int s = 1; s < model.stage_count(); ++s) {
    uniform_devices = uniform_devices && model.speed(s) == model.speed(0);
  }
  if (uniform_devices) return best;
  return smallest_sum_partition(instance, upper_ms);
}

int64_t smallest_feasible_memory_cap(const CostModel& model, const CostModel* alternative) {
  const int n = model.layer_count();
  const int k = model.stage_count();
  const ExtentMemory memory{model, alternative};
  // Probe a cap: stage s reaches ends (a, limit(a)] from every reachable start a; keeping the
  // reachable start with the furthest limit yields one witness partition per end.
  auto probe = [&](int64_t cap_bytes, int64_t& achieved_bytes, int64_t& next_cap_bytes) {
    const Instance instance(memory, std::vector<int64_t>(k, cap_bytes));
    std::vector<std::vector<int>> choice(k, std::vector<int>(n + 1, -1));
    std::vector<char> reach(n + 1, 0);
    reach[0] = 1;
    next_cap_bytes = kUnlimitedBytes;
    for (int s = 0; s < k; ++s) {
      std::vector<char> next_reach(n + 1, 0);
      int best = -1;
      for (int j = instance.first_end(s); j <= instance.last_end(s); ++j) {
        const int a = j - 1;
        if (reach[a]) {
          const int limit = instance.limit_of(s, a);
          if (best < 0 || limit > instance.limit_of(s, best)) best = a;
          if (limit < instance.last_end(s)) {
            next_cap_bytes = std::min(next_cap_bytes, memory(s, a, limit + 1));
          }
        }
        if (best >= 0 && instance.limit_of(s, best) >= j) {
          next_reach[j] = 1;
          choice[s][j] = best;
        }
      }
      reach.swap(next_reach);
    }
    if (!reach[n]) return false;
    const std::vector<int> balance = unwind(choice, n);
    achieved_bytes = 0;
    for (int s = 0, first = 0; s < k; first += balance[s], ++s) {
      achieved_bytes = std::max(achieved_bytes, memory(s, first, first + balance[s]));
    }
    return true;
  };

  int64_t upper_bytes = 0;
  int64_t unused = 0;
  // A stage's memory saturates at kUnlimitedBytes: where every partition has one, no cap fits.
  if (!probe(kUnlimitedBytes - 1, upper_bytes, unused)) return kUnlimitedBytes;
  int64_t lower_bytes = 0;
  while (lower_bytes < upper_bytes) {
    const int64_t cap_bytes = lower_bytes + (upper_bytes - lower_bytes) / 2;
    int64_t achieved_bytes = 0;
    int64_t next_bytes = 0;
    if (probe(cap_bytes, achieved_bytes, next_bytes)) {
      upper_bytes = achieved_bytes;
    } else {
      lower_bytes = std::min(next_bytes, upper_bytes);
    }
  }
  return upper_bytes;
}

}  // namespace pipebal::balance
