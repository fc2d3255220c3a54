// See planner.h.
#include "pipebal/balance/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/balance/dp_partition.h"
#include "pipebal/balance/interleaved_partition.h"
#include "pipebal/balance/partition.h"
#include "pipebal/common/format_bytes.h"

namespace pipebal::balance {
namespace {

// A profile of the plain model on several threads stands beside `profile`'s configurations only
// if it measured the same model on the same input; what either profile leaves unsaid (a
// hand-written one's names, inputs, dtype) is not held against the other.
void check_same_model_and_input(const CostProfile& wide, const CostProfile& profile) {
  const auto refuse = [](const std::string& difference) {
    throw std::invalid_argument(
        fmt::format("a plain-model profile {}: profile the same model and input", difference));
  };
  if (wide.layers.size() != profile.layers.size() ||
      wide.mini_batch_size() != profile.mini_batch_size()) {
    refuse(fmt::format("has {} layers and a mini-batch of {}, the profile {} and {}",
                       wide.layers.size(), wide.mini_batch_size(), profile.layers.size(),
                       profile.mini_batch_size()));
  }
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const std::string& name = profile.layers[i].name;
    const std::string& wide_name = wide.layers[i].name;
    if (!name.empty() && !wide_name.empty() && name != wide_name) {
      refuse(fmt::format("names layer {} '{}', the profile '{}'", i, wide_name, name));
    }
  }
  if (!wide.inputs.empty() && !profile.inputs.empty() && wide.inputs != profile.inputs) {
    refuse(fmt::format("has inputs {}, the profile {}", fmt::join(wide.inputs, " "),
                       fmt::join(profile.inputs, " ")));
  }
  if (!wide.dtype.empty() && !profile.dtype.empty() && wide.dtype != profile.dtype) {
    refuse(fmt::format("was measured in {}, the profile in {}", wide.dtype, profile.dtype));
  }
}

using pipeline::CheckpointMode;
using pipeline::ScheduleKind;

// Micro-batch counts above this are never searched: no pipeline gains from them.
constexpr int kMaxSearchedChunks = 1024;

template <typename T>
std::vector<T> first_devices(const std::vector<T>& per_device, int count) {
  if (per_device.size() <= 1) return per_device;
  return {per_device.begin(), per_device.begin() + count};
}

// A pipeline's per-device values when `replicas` copies of its `stages` devices run side by
// side, replica r's stage s on device r x stages + s (distributed/placement.h): each stage's
// least over its replicas, the smallest cap or the slowest speed, which the step must wait for.
template <typename T>
std::vector<T> over_replicas(const std::vector<T>& per_device, int stages, int replicas) {
  std::vector<T> out = first_devices(per_device, stages);
  if (per_device.size() <= 1) return out;
  for (int r = 1; r < replicas; ++r) {
    for (int s = 0; s < stages; ++s) {
      out[static_cast<size_t>(s)] =
          std::min(out[static_cast<size_t>(s)], per_device[static_cast<size_t>(r * stages + s)]);
    }
  }
  return out;
}

template <typename T>
void check_per_device(const std::vector<T>& values, int devices, const char* what) {
  if (values.size() > 1 && values.size() != static_cast<size_t>(devices)) {
    throw std::invalid_argument(
        fmt::format("{}: {} values for {} devices (give one for every device or one per device)",
                    what, values.size(), devices));
  }
}

// The counts to search for a mini-batch of `batch` samples (one replica's).
std::vector<int> candidate_chunks(const CostProfile& profile, int64_t batch, int replicas,
                                  const std::vector<int>& given) {
  std::vector<int> out;
  if (!given.empty()) {
    for (const int m : given) {
      // A count that does not divide the batch is costed at its largest micro-batches, rounded
      // up, as balance charges it (the engine's scatter makes them differ by at most one).
      if (m < 1) throw std::invalid_argument(fmt::format("--chunks must be at least 1, got {}", m));
      if (m > batch) {
        if (replicas > 1) continue;  // this replica count cannot use it
        throw std::invalid_argument(fmt::format(
            "--chunks {} is more than the mini-batch of {} samples: at most one micro-batch per "
            "sample",
            m, batch));
      }
      out.push_back(m);
    }
  } else {
    const std::vector<int64_t> sizes = measured_sizes(profile);
    if (sizes.size() > 1) {
      const int64_t top = std::min<int64_t>(batch, kMaxSearchedChunks);
      for (int m = 1; m <= top; ++m) {
        const int64_t size = batch / m;
        if (batch % m == 0 && size >= sizes.front() && size <= sizes.back()) out.push_back(m);
      }
    } else if (replicas == 1) {
      out.push_back(planned_chunks(profile, 0));  // the one size measured
    } else if (!sizes.empty() && batch % sizes.front() == 0) {
      out.push_back(static_cast<int>(batch / sizes.front()));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// An `--input` spec ("int64[32,64]:1000") with `batch` samples: the first dimension replaced.
std::string with_batch(const std::string& spec, int64_t batch) {
  const auto open = spec.find('[');
  const auto end = open == std::string::npos ? open : spec.find_first_of(",]", open);
  if (end == std::string::npos) return spec;
  return spec.substr(0, open + 1) + std::to_string(batch) + spec.substr(end);
}

// The stages per device a schedule is searched with: 1, or each of `interleaved` for kInterleaved.
std::vector<int> per_device_counts(ScheduleKind schedule, const std::vector<int>& interleaved) {
  return schedule == ScheduleKind::kInterleaved ? interleaved : std::vector<int>{1};
}

// Speed-up over the plain model and throughput of the whole mini-batch.
void rate(Configuration& config, const Configuration& plain, int64_t batch) {
  config.speedup = plain.step_ms / config.step_ms;
  config.samples_per_s = 1000.0 * double(batch) / config.step_ms;
}

int64_t peak_bytes(const Plan& plan) {
  const std::vector<int64_t> held = plan.device_timed_memory_bytes();
  return *std::max_element(held.begin(), held.end());
}

// dp's balances already found for one stage count and micro-batch count, by checkpoint mode.
// GPipe and 1F1B charge a partition the same stage costs and differ only in the memory they hold,
// so without memory caps they share dp's balance (a 5000-layer model on 128 devices then costs
// half the search).
using SharedBalances = std::map<CheckpointMode, std::vector<int>>;

bool shares_balance(const CostModel& model) {
  const ScheduleKind kind = model.schedule().kind;
  if (kind != ScheduleKind::kGPipe && kind != ScheduleKind::kOneFOneB) return false;
  for (int s = 0; s < model.stage_count(); ++s) {
    if (model.memory_cap_bytes(s) != kUnlimitedBytes) return false;
  }
  return true;
}

// dp's balance for `config` (from `shared` when it holds one for it), planned into config.plan;
// false when no partition fits the caps (or its predicted peak does not).
bool choose_balance(const CostModel& model, Configuration& config, SharedBalances* shared) {
  std::vector<int> balance;
  const bool sharing = shared != nullptr && shares_balance(model);
  const auto known = sharing ? shared->find(config.checkpoint) : SharedBalances::iterator{};
  if (sharing && known != shared->end()) {
    balance = known->second;
  } else {
    try {
      // Interleaved searches on from dp's balance below; zb-h1 is balanced before its delays.
      balance = config.virtual_stages > 1 ? dp_partition(model)
                                          : partition_balance(model, Algorithm::kDp);
    } catch (const std::invalid_argument&) {
      return false;  // no partition within the memory caps
    }
    if (sharing) shared->emplace(config.checkpoint, balance);
  }
  std::optional<InterleavedSearch> search;
  if (config.virtual_stages > 1) {
    try {
      search = interleaved_partition(model, balance, kPlannerSearchNodes);
    } catch (const std::invalid_argument&) {
      return false;  // the devices' stages do not fit their caps together
    }
    balance = search->balance;
  }
  config.plan = plan_balance(model, balance, "dp");
  if (search) {
    config.plan.search_nodes = search->nodes;
    config.plan.search_exhaustive = search->exhaustive;
  }
  // The balance keeps what the stages' actions hold within the caps; the messages waiting for
  // their receiver on the simulated timeline may still take a device past its cap.
  return config.plan.fits_memory();
}

// Costs one configuration with dp's balance, or with `fixed`'s balance and W delays when given;
// false when no partition fits the caps.
bool cost_configuration(const CostProfile& profile, const CostsAtSize& at, CostOptions options,
                        int64_t replica_batch, Configuration& config, const Plan* fixed = nullptr,
                        SharedBalances* shared = nullptr) {
  options.chunks = config.chunks;
  options.schedule = config.schedule;
  options.virtual_stages = config.virtual_stages;
  options.checkpoint = config.checkpoint;
  options.replicas = config.replicas;
  options.memory_caps_bytes =
      over_replicas(options.memory_caps_bytes, config.stages, config.replicas);
  options.device_speeds = over_replicas(options.device_speeds, config.stages, config.replicas);
  if (fixed) options.weight_delays = fixed->weight_delays;
  if (profile.engine) options.engine = *profile.engine;
  CostModel model(at.layers, config.stages * config.virtual_stages, options);
  // The plan's step with one micro-batch at the replica's whole batch's own costs where they
  // were measured apart (its speed-up over it is what `balance` shows and plan.json records).
  if (profile.sizes.size() > 1 && config.chunks > 1) {
    model.set_whole_batch_layers(costs_at_micro_batch_size(profile, replica_batch).layers);
  }
  if (fixed) {
    config.plan = plan_balance(model, fixed->balance, fixed->algorithm);
  } else if (!choose_balance(model, config, shared)) {
    return false;
  }
  config.plan.model = profile.model;
  config.plan.dtype = profile.dtype;
  config.plan.input_shape = profile.input_shape;
  config.plan.input_shape[0] = replica_batch;
  for (const std::string& spec : profile.inputs) {
    config.plan.inputs.push_back(with_batch(spec, replica_batch));
  }
  config.costs = at.source;
  config.micro_batch_size = at.micro_batch_size;
  config.step_ms = config.plan.prediction.step_ms;
  config.peak_bytes = peak_bytes(config.plan);
  config.devices = config.stages * config.replicas;
  return true;
}

// Step times equal to a nanosecond are ties (a sum of the same costs in another order differs in
// its last bits); ties go to fewer devices, then less memory, then fewer micro-batches, then
// less checkpointing.
int checkpoint_rank(CheckpointMode mode) {
  return mode == CheckpointMode::kNever ? 0 : mode == CheckpointMode::kExceptLast ? 1 : 2;
}

// Steps equal to the nanosecond tie (then fewer devices, stages, bytes, ... first); rounded in
// double, which holds any step (llround overflows past 9.2e12 ms: a link of bytes per second).
auto rank_key(const Configuration& c) {
  return std::make_tuple(std::round(c.step_ms * 1e6), c.devices, c.stages, c.peak_bytes, c.chunks,
                         static_cast<int>(c.schedule), c.virtual_stages,
                         checkpoint_rank(c.checkpoint));
}

// Drops a configuration when an earlier (no slower) one of the same stages, replicas and
// chunks needs no more memory: it differs only in a schedule or checkpoint mode that buys
// nothing.
std::vector<Configuration> without_dominated(std::vector<Configuration> ranked) {
  std::vector<Configuration> kept;
  for (Configuration& config : ranked) {
    const bool dominated = std::any_of(kept.begin(), kept.end(), [&](const Configuration& k) {
      return k.stages == config.stages && k.replicas == config.replicas &&
             k.chunks == config.chunks && k.threads_per_stage == config.threads_per_stage &&
             k.peak_bytes <= config.peak_bytes;
    });
    if (!dominated) kept.push_back(std::move(config));
  }
  return kept;
}

bool has_schedule(const std::vector<Configuration>& configs, ScheduleKind schedule) {
  return std::any_of(configs.begin(), configs.end(),
                     [schedule](const Configuration& c) { return c.schedule == schedule; });
}

// How much a configuration asks of the machine: the plain model on one device (its micro-batches
// accumulated or not), what does not pipeline but occupies several devices (the plain model on
// several threads, data-parallel replicas), a pipeline.
int demand(const Configuration& c) {
  if (c.stages > 1) return 2;
  return c.devices > 1 ? 1 : 0;
}

// The fastest of `ranked` (sorted), unless one that asks less of the machine is within
// `min_gain` of it: the fastest of the least demanding such kind.
size_t recommended(const std::vector<Configuration>& ranked, double min_gain) {
  if (ranked.empty()) return 0;
  const double margin = ranked.front().step_ms * (1 + min_gain);
  for (int kind = 0; kind < demand(ranked.front()); ++kind) {
    const auto fastest = std::find_if(ranked.begin(), ranked.end(),
                                      [kind](const Configuration& c) { return demand(c) == kind; });
    if (fastest != ranked.end() && fastest->step_ms < margin) {
      return static_cast<size_t>(fastest - ranked.begin());
    }
  }
  return 0;
}

}  // namespace

std::string describe(const Configuration& c) {
  if (c.stages == 1 && c.chunks == 1 && !pipeline::is_checkpointed(c.checkpoint, 0, 1)) {
    if (c.threads_per_stage > 1) {
      return fmt::format("the plain model on {} threads", c.threads_per_stage);
    }
    return c.replicas > 1 ? fmt::format("data parallel over {} devices", c.replicas)
                          : "the plain model on one device";
  }
  std::string text =
      fmt::format("{} stage{}, {} micro-batch{}, {}, checkpoint {}", c.stages,
                  c.stages > 1 ? "s" : "", c.chunks, c.chunks > 1 ? "es" : "",
                  pipeline::to_string(c.schedule), pipeline::to_string(c.checkpoint));
  if (c.virtual_stages > 1) {
    text = fmt::format("{} devices of {} stages, {} micro-batches, interleaved, checkpoint {}",
                       c.stages, c.virtual_stages, c.chunks, pipeline::to_string(c.checkpoint));
  }
  if (c.replicas > 1) text += fmt::format(", {} replicas", c.replicas);
  return text;
}

Configuration plain_model(const CostProfile& profile, const CostOptions& costs) {
  const int64_t batch = profile.mini_batch_size();
  if (batch <= 0) {
    throw std::invalid_argument(
        "the profile does not say its mini-batch (input_shape): profile it with pipebal profile");
  }
  Configuration plain;
  CostOptions options = costs;
  options.memory_caps_bytes.clear();
  options.allreduce_bytes_per_ms = 0;
  if (!cost_configuration(profile, costs_at_micro_batch_size(profile, batch), options, batch,
                          plain)) {
    throw std::logic_error("the plain model does not fit unlimited memory");
  }
  if (!costs.memory_caps_bytes.empty()) {
    plain.plan.stages[0].memory_cap_bytes = costs.memory_caps_bytes.front();
  }
  rate(plain, plain, batch);
  return plain;
}

namespace {

// The plain model on `threads` intra-op threads, one stage using as many devices; `profile` is
// that thread count's.
Configuration plain_on_threads(const CostProfile& profile, const CostOptions& costs, int threads) {
  Configuration config = plain_model(profile, costs);
  config.threads_per_stage = threads;
  config.plan.threads_per_stage = threads;
  config.devices = threads;
  return config;
}

// Every pipelined configuration the search costs, uncosted, grouped by replicas, micro-batch
// count and stage count; `any_chunks` tells whether some micro-batch count was searched.
std::vector<Configuration> pipelined_candidates(const CostProfile& profile,
                                                const PlanSearch& search,
                                                const std::vector<ScheduleKind>& schedules,
                                                const std::vector<CheckpointMode>& checkpoints,
                                                bool& any_chunks) {
  const int64_t batch = profile.mini_batch_size();
  const int layers = static_cast<int>(profile.layers.size());
  // Past it the partitioners' tables would be too large (cost_model.h): not searched.
  const auto most_stages = static_cast<int>(
      std::min<int64_t>(kMaxStageLayerPairs / layers, std::numeric_limits<int>::max()));
  std::vector<Configuration> candidates;
  for (int replicas = 1; replicas <= (search.data_parallel ? search.devices : 1); ++replicas) {
    if (batch % replicas != 0) continue;
    for (const int chunks : candidate_chunks(profile, batch / replicas, replicas, search.chunks)) {
      any_chunks = true;
      for (int stages = 1; stages <= std::min({search.devices / replicas, layers, most_stages});
           ++stages) {
        for (const ScheduleKind schedule : schedules) {
          for (const int per_device : per_device_counts(schedule, search.virtual_stages)) {
            // Interleaving needs devices to interleave, whole rounds of micro-batches and enough
            // layers.
            if (per_device > 1 && (stages < 2 || chunks % stages != 0 ||
                                   stages * per_device > std::min(layers, most_stages))) {
              continue;
            }
            for (const CheckpointMode checkpoint : checkpoints) {
              Configuration config;
              config.stages = stages;
              config.virtual_stages = per_device;
              config.replicas = replicas;
              config.chunks = chunks;
              config.schedule = schedule;
              config.checkpoint = checkpoint;
              candidates.push_back(std::move(config));
            }
          }
        }
      }
    }
  }
  return candidates;
}

}  // namespace

std::optional<Configuration> configure(const CostProfile& profile, const CostOptions& costs,
                                       const Configuration& shape, const Configuration& plain) {
  const int64_t batch = profile.mini_batch_size();
  if (batch <= 0 || shape.replicas < 1 || batch % shape.replicas != 0) {
    throw std::invalid_argument(fmt::format(
        "{} replicas do not divide the profiled mini-batch of {} samples", shape.replicas, batch));
  }
  const int64_t replica_batch = batch / shape.replicas;
  if (shape.chunks < 1 || shape.chunks > replica_batch) {
    throw std::invalid_argument(fmt::format(
        "{} micro-batches do not fit a mini-batch of {} samples", shape.chunks, replica_batch));
  }
  Configuration config = shape;
  const CostsAtSize at =
      costs_at_micro_batch_size(profile, micro_batch_size(replica_batch, shape.chunks));
  if (!cost_configuration(profile, at, costs, replica_batch, config)) return std::nullopt;
  rate(config, plain, batch);
  return config;
}

Configuration reprice(const CostProfile& profile, const CostOptions& costs,
                      const Configuration& config, const Configuration& plain) {
  const int64_t batch = profile.mini_batch_size();
  if (config.threads_per_stage > 1) {  // `profile` is that thread count's
    Configuration wide = plain_on_threads(profile, costs, config.threads_per_stage);
    rate(wide, plain, batch);
    return wide;
  }
  if (batch <= 0 || batch % config.replicas != 0) {
    throw std::invalid_argument(fmt::format(
        "{} replicas do not divide the profiled mini-batch of {} samples", config.replicas, batch));
  }
  const int64_t replica_batch = batch / config.replicas;
  Configuration priced = config;
  const CostsAtSize at =
      costs_at_micro_batch_size(profile, micro_batch_size(replica_batch, config.chunks));
  CostOptions unlimited = costs;
  unlimited.memory_caps_bytes.clear();  // the configuration ran: price it, fitting or not
  cost_configuration(profile, at, unlimited, replica_batch, priced, &config.plan);
  rate(priced, plain, batch);
  return priced;
}

PlanSearchResult search_plans(const CostProfile& profile, const PlanSearch& search) {
  if (search.devices < 1 || search.devices > 4096) {
    throw std::invalid_argument(
        fmt::format("devices must be from 1 to 4096, got {}", search.devices));
  }
  if (!(search.min_gain >= 0 && search.min_gain <= 10)) {
    throw std::invalid_argument(
        fmt::format("the minimum gain must be from 0 to 1000%, got {}%", 100 * search.min_gain));
  }
  check_per_device(search.costs.memory_caps_bytes, search.devices, "memory caps");
  check_per_device(search.costs.device_speeds, search.devices, "device speeds");
  PlanSearchResult result;
  // The reference: the whole mini-batch through the plain model on one device (which also
  // refuses a profile that does not say its mini-batch).
  result.plain = plain_model(profile, search.costs);
  const Configuration& plain = result.plain;
  const int64_t batch = profile.mini_batch_size();
  const std::vector<ScheduleKind> schedules =
      search.schedules.empty()
          ? std::vector<ScheduleKind>{ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}
          : search.schedules;
  const std::vector<CheckpointMode> checkpoints =
      search.checkpoints.empty()
          ? std::vector<CheckpointMode>{CheckpointMode::kNever, CheckpointMode::kExceptLast,
                                        CheckpointMode::kAlways}
          : search.checkpoints;
  const int layers = static_cast<int>(profile.layers.size());

  result.one_size = measured_sizes(profile).size() <= 1 && search.chunks.empty();

  bool any_chunks = false;
  std::vector<Configuration> candidates =
      pipelined_candidates(profile, search, schedules, checkpoints, any_chunks);
  std::vector<Configuration> feasible;
  int interleaved_searched = 0;
  // Costs at the micro-batch size last costed (the candidates come grouped by it), and dp's
  // balances shared within each group of replicas, chunks and stages.
  std::optional<CostsAtSize> at;
  int64_t at_size = -1;
  std::map<std::tuple<int, int, int>, SharedBalances> shared;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (search.on_progress) search.on_progress(i, candidates.size());
    Configuration& config = candidates[i];
    const int64_t replica_batch = batch / config.replicas;
    const int64_t size = micro_batch_size(replica_batch, config.chunks);
    if (size != at_size) {
      at = costs_at_micro_batch_size(profile, size);
      at_size = size;
    }
    ++result.searched;
    interleaved_searched += config.virtual_stages > 1;
    SharedBalances& group = shared[{config.replicas, config.chunks, config.stages}];
    if (!cost_configuration(profile, *at, search.costs, replica_batch, config, nullptr, &group)) {
      ++result.over_memory;
      continue;
    }
    rate(config, plain, batch);
    feasible.push_back(std::move(config));
  }
  if (search.on_progress) search.on_progress(candidates.size(), candidates.size());
  // The plain model on several threads: one stage using as many devices as threads.
  for (const CostProfile& wide : search.plain_profiles) {
    check_same_model_and_input(wide, profile);
    if (wide.threads < 2 || wide.threads > search.devices) {
      result.plain_threads_not_weighed.push_back(wide.threads);
      continue;
    }
    ++result.searched;
    Configuration config = plain_on_threads(wide, search.costs, wide.threads);
    if (!config.plan.fits_memory()) {
      ++result.over_memory;
      continue;
    }
    rate(config, plain, batch);
    feasible.push_back(std::move(config));
  }
  // The plain model on one device is a candidate whatever --schedules, --chunks and
  // --checkpoints leave out: a recommendation is never slower than not pipelining for want of it.
  // From a profile of one other size it is extrapolated (fixed costs scaled too: slower than it
  // would measure), and added only beside something searched that fits.
  const bool plain_searched =
      std::any_of(feasible.begin(), feasible.end(), [](const Configuration& c) {
        return c.stages == 1 && c.chunks == 1 && c.replicas == 1 && c.threads_per_stage <= 1 &&
               !pipeline::is_checkpointed(c.checkpoint, 0, 1);
      });
  if (!plain_searched && plain.plan.fits_memory() &&
      (plain.costs != CostSource::kExtrapolated || !feasible.empty())) {
    feasible.push_back(plain);
  }
  if (std::count(schedules.begin(), schedules.end(), ScheduleKind::kInterleaved) > 0 &&
      interleaved_searched == 0 && any_chunks) {
    result.interleaved_not_searched =
        search.devices < 2
            ? fmt::format("needs 2 devices or more ({} given)", search.devices)
            : fmt::format(
                  "needs 2 stages or more, a micro-batch count that is a multiple of the stage "
                  "count, and at least {} layers per device ({} layers here): no configuration "
                  "searched has them",
                  fmt::join(search.virtual_stages, " or "), layers);
  }
  if (feasible.empty()) {
    if (result.searched == 0) {
      throw std::invalid_argument(
          any_chunks ? "no configuration to search: interleaved " + result.interleaved_not_searched
                     : std::string("no configuration to search: no micro-batch count divides the "
                                   "mini-batch into a profiled size"));
    }
    // What the leanest configuration searched would need: the most stages and micro-batches,
    // 1F1B, every micro-batch checkpointed.
    const int stages = static_cast<int>(
        std::min<int64_t>(std::min(search.devices, layers), kMaxStageLayerPairs / layers));
    CostOptions lean = search.costs;
    lean.schedule = ScheduleKind::kOneFOneB;
    lean.checkpoint = CheckpointMode::kAlways;
    lean.memory_caps_bytes.clear();
    lean.device_speeds = first_devices(lean.device_speeds, stages);
    const std::vector<int> counts = candidate_chunks(profile, batch, 1, search.chunks);
    lean.chunks = counts.empty() ? 1 : counts.back();
    const CostModel model(layers_for_chunks(profile, lean.chunks), stages, lean);
    const int64_t needed = smallest_feasible_memory_cap(model);
    throw std::invalid_argument(fmt::format(
        "no configuration fits the memory caps: the leanest searched ({} stages, {} "
        "micro-batches, 1f1b, checkpoint always) needs {} per device",
        stages, lean.chunks,
        needed == kUnlimitedBytes
            ? fmt::format("more than {}, the most pipebal counts (are the profile's bytes and "
                          "--param-scale right?)",
                          format_bytes(static_cast<double>(kUnlimitedBytes)))
            : "a cap of " + format_bytes(needed)));
  }
  std::sort(feasible.begin(), feasible.end(), [](const Configuration& a, const Configuration& b) {
    return rank_key(a) < rank_key(b);
  });
  if (search.keep_dominated) {
    result.ranked = std::move(feasible);
  } else {
    std::vector<ScheduleKind> fitting;  // of the schedules searched (not the plain model's)
    for (const ScheduleKind schedule : schedules) {
      if (has_schedule(feasible, schedule)) fitting.push_back(schedule);
    }
    const size_t fit = feasible.size();
    result.ranked = without_dominated(std::move(feasible));
    result.dominated = static_cast<int>(fit - result.ranked.size());
    for (const ScheduleKind schedule : fitting) {
      if (!has_schedule(result.ranked, schedule)) result.dominated_schedules.push_back(schedule);
    }
  }
  result.recommended = recommended(result.ranked, search.min_gain);
  return result;
}

}  // namespace pipebal::balance
