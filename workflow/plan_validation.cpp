// See plan_validation.h.
#include "pipebal/workflow/plan_validation.h"

#include <algorithm>
#include <future>
#include <optional>
#include <stdexcept>
#include <utility>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/cores.h"
#include "pipebal/common/schema.h"
#include "pipebal/common/thread_pinning.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profile_merge.h"
#include "pipebal/reports/validation_record.h"
#include "pipebal/workflow/core_speeds.h"
#include "pipebal/workflow/interleaved_runs.h"
#include "pipebal/workflow/profiling.h"
#include "pipebal/workflow/run_checks.h"
#include "pipebal/workflow/training_run.h"
#include "pipebal/workflow/watchdog.h"

namespace pipebal::workflow {
namespace {

// Rounds of timing the plain model on each block of cores (bind_cores), interleaved.
constexpr int kCoreSpeedRounds = 3;

constexpr int kMaxDefaultChunks = 16;

std::vector<int> default_chunks(int64_t batch) {
  std::vector<int> chunks;
  for (int m = 1; m <= kMaxDefaultChunks && m <= batch; m *= 2) {
    if (batch % m == 0) chunks.push_back(m);
  }
  return chunks;
}

void check(const AutoValidateSettings& p) {
  if (p.output.empty()) {
    throw std::invalid_argument("validate: give an output directory with -o DIR");
  }
  if (p.devices < 1 || p.devices > 64) {
    throw std::invalid_argument(fmt::format("--devices must be from 1 to 64, got {}", p.devices));
  }
  if (p.profile_repeat < 1) {
    throw std::invalid_argument(
        fmt::format("--profile-repeat must be at least 1, got {}", p.profile_repeat));
  }
  if (p.profile_rounds < 1) {
    throw std::invalid_argument(
        fmt::format("--profile-rounds must be at least 1, got {}", p.profile_rounds));
  }
  if (p.top < 0) {
    throw std::invalid_argument(fmt::format("--top must be at least 0, got {}", p.top));
  }
  check_run_limits(p.steps, p.warmup_steps, p.step_timeout_s);
  pipeline::check_threads_per_stage(p.threads_per_stage);
  if (p.bind_cores) {
    try {
      cores_for_groups(p.devices, p.threads_per_stage);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--bind-cores: ") + e.what());
    }
  }
  if (p.user && p.user->schedule == pipeline::ScheduleKind::kInterleaved) {
    throw std::invalid_argument(
        "--auto compares gpipe and 1f1b configurations; validate an interleaved one without "
        "--auto (--schedule interleaved --virtual V)");
  }
  if (p.user && p.user->stages > p.devices) {
    throw std::invalid_argument(
        fmt::format("your configuration's {} stages need {} devices, "
                    "--devices is {}",
                    p.user->stages, p.user->stages, p.devices));
  }
}

// Adds `config` under `label`, or the label to an equal configuration already listed.
void add(std::vector<CheckedConfiguration>& list, const balance::Configuration& config,
         const std::string& label) {
  for (CheckedConfiguration& c : list) {
    const balance::Configuration& x = c.config;
    if (x.stages == config.stages && x.chunks == config.chunks && x.schedule == config.schedule &&
        x.checkpoint == config.checkpoint && x.plan.balance == config.plan.balance &&
        x.threads_per_stage == config.threads_per_stage) {
      c.labels.push_back(label);
      return;
    }
  }
  CheckedConfiguration added;
  added.labels = {label};
  added.config = config;
  list.push_back(std::move(added));
}

// `device_cpus`: each device's cores, in the plan's device order; empty: not pinned.
TrainSettings train_settings(const AutoValidateSettings& p,
                             const std::vector<models::InputSpec>& inputs,
                             const balance::Configuration& config,
                             const std::vector<std::vector<int>>& device_cpus) {
  TrainSettings s;
  s.model = p.model;
  s.inputs = models::to_strings(inputs);
  s.dtype = p.dtype;
  s.balance = config.plan.balance;
  s.chunks = config.chunks;
  s.schedule = config.schedule;
  s.virtual_stages = config.virtual_stages;
  s.weight_delays = config.plan.weight_delays;
  s.checkpoint = config.checkpoint;
  s.threads_per_stage =
      config.threads_per_stage > 0 ? config.threads_per_stage : p.threads_per_stage;
  s.steps = p.steps;
  s.warmup_steps = p.warmup_steps;
  s.seed = p.seed;
  s.step_timeout_s = p.step_timeout_s;
  if (!device_cpus.empty()) {
    if (s.threads_per_stage > p.threads_per_stage) {  // the plain model on every device's threads
      s.device_cpus.emplace_back();
      for (const std::vector<int>& cpus : device_cpus) {
        s.device_cpus.front().insert(s.device_cpus.front().end(), cpus.begin(), cpus.end());
      }
    } else {
      const size_t per_device =
          s.schedule == pipeline::ScheduleKind::kInterleaved ? size_t(s.virtual_stages) : 1;
      s.device_cpus.assign(
          device_cpus.begin(),
          device_cpus.begin() + static_cast<std::ptrdiff_t>(s.balance.size() / per_device));
    }
  }
  return s;
}

nlohmann::json configuration_json(const CheckedConfiguration& c) {
  const balance::Configuration& x = c.config;
  nlohmann::json json = {{"labels", c.labels},
                         {"stages", x.stages},
                         {"chunks", x.chunks},
                         {"threads_per_stage", x.threads_per_stage},
                         {"schedule", pipeline::to_string(x.schedule)},
                         {"checkpoint", pipeline::to_string(x.checkpoint)},
                         {"micro_batch_size", x.micro_batch_size},
                         {"costs", balance::to_string(x.costs)},
                         {"balance", x.plan.balance},
                         {"predicted_step_ms", x.step_ms},
                         {"measured_step_ms", c.measured_step_ms},
                         {"measured_steps_ms", c.measured_steps_ms},
                         {"step_error", reports::relative_error(x.step_ms, c.measured_step_ms)},
                         {"predicted_rank", c.predicted_rank},
                         {"measured_rank", c.measured_rank}};
  if (c.predicted_in_turns_ms > 0) {
    json["predicted_in_turns_step_ms"] = c.predicted_in_turns_ms;
    json["step_error_in_turns"] =
        reports::relative_error(c.predicted_in_turns_ms, c.measured_step_ms);
  }
  return json;
}

// Every configuration predicted again from the profiles taken in turns with the runs: `sized`
// for the stages' own thread count, `wide` (when taken) for the plain model on several threads.
void predict_in_turns(std::vector<CheckedConfiguration>& list, const profiler::Profile& sized,
                      const std::optional<profiler::Profile>& wide,
                      const balance::CostOptions& costs) {
  const balance::CostProfile sized_costs = profiler::cost_profile(sized);
  const balance::Configuration plain = balance::plain_model(sized_costs, costs);
  for (CheckedConfiguration& c : list) {
    if (c.config.threads_per_stage <= 1) {
      c.predicted_in_turns_ms = balance::reprice(sized_costs, costs, c.config, plain).step_ms;
    } else if (wide && wide->environment.intra_op_threads == c.config.threads_per_stage) {
      c.predicted_in_turns_ms =
          balance::reprice(profiler::cost_profile(*wide), costs, c.config, plain).step_ms;
    }
  }
}

// Where `list` holds the plain model on `threads` threads; -1 when it does not.
int plain_on_threads_index(const std::vector<CheckedConfiguration>& list, int threads) {
  for (size_t k = 0; k < list.size(); ++k) {
    const balance::Configuration& c = list[k].config;
    if (c.stages == 1 && c.threads_per_stage == threads) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

const std::vector<std::string>& plan_validation_files() {
  // report.html: what `pipebal report DIR` adds, replaced with the rest by a new run.
  static const std::vector<std::string> files = {"profile.json",
                                                 "profile-threads.json",
                                                 "profile-in-turns.json",
                                                 "profile-threads-in-turns.json",
                                                 "plan.json",
                                                 "plan-validation.json",
                                                 "report.html"};
  return files;
}

nlohmann::json auto_validation_to_json(const AutoValidation& v) {
  nlohmann::json configurations = nlohmann::json::array();
  for (const CheckedConfiguration& c : v.configurations) {
    configurations.push_back(configuration_json(c));
  }
  return {{"schema", schema_tag("pipebal.plan-validation", 1)},
          {"model", v.model},
          {"input_shape", v.input_shape},
          {"devices", v.devices},
          {"device_cpus", v.device_cpus},
          {"device_speeds", v.device_speeds},
          {"device_times_ms", v.device_times_ms},
          {"device_speeds_in_turns", v.device_speeds_in_turns},
          {"searched", v.searched},
          {"configurations", std::move(configurations)}};
}

int one_stage_per_device_index(const std::vector<CheckedConfiguration>& list, int devices) {
  for (size_t k = 0; k < list.size(); ++k) {
    const balance::Configuration& c = list[k].config;
    if (c.stages == devices && c.virtual_stages == 1 && c.replicas == 1 &&
        c.threads_per_stage == 0) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

AutoValidation validate_plan(const AutoValidateSettings& p, const StatusFn& status) {
  check(p);
  const auto say = [&status](const std::string& line) {
    if (status) status(line);
  };
  at::set_num_threads(p.threads_per_stage);  // profile with the stages' thread count
  const models::Model model = models::build_model(p.model, p.seed);
  std::vector<models::InputSpec> inputs = models::model_inputs(model, p.inputs, p.input_shape);
  if (!p.dtype.empty()) {
    const c10::ScalarType dtype = profiler::parse_dtype(p.dtype);
    model.layers.to(dtype);  // the layers are shared: const Model, mutable parameters
    inputs = models::with_float_dtype(inputs, dtype);
  }
  const std::vector<int64_t>& shape = inputs.front().shape;
  const std::vector<int> chunks = p.chunks.empty() ? default_chunks(shape[0]) : p.chunks;
  micro_batch_sizes(chunks, shape[0]);  // checks them before any work
  StagedDirectory output(p.output, plan_validation_files());

  const int wide_threads = p.devices * p.threads_per_stage;
  const int cores = usable_cores();
  const bool profile_wide = p.devices > 1 && wide_threads <= cores;
  const int rounds = std::min(p.profile_rounds, p.profile_repeat);  // a pass each at least
  profiler::ProfileOptions options;
  options.repeat = (p.profile_repeat + rounds - 1) / rounds;
  Watchdog watchdog(p.step_timeout_s, "profiling the first layer");
  const auto co_runners = [&p](int m) { return m > 1 ? p.devices - 1 : 0; };
  const auto beat = [&watchdog](int64_t size, const profiler::ProfileProgress& progress) {
    watchdog.beat(fmt::format("profiling at micro-batch size {}, {} of {}", size, progress.done,
                              progress.total));
  };
  // The plain model on the calling thread's intra-op threads and CPUs.
  const auto profile_plain = [&](profiler::ProfileOptions at) {
    at.co_runners = 0;
    at.device_cpus.clear();
    return profile_at_sizes(model, inputs, {1}, p.seed, at, {}, beat);
  };
  // `job` on a thread of its own, pinned to `cpus` (none: where the scheduler puts it) with
  // `threads` intra-op threads: its OpenMP pool starts there, on those CPUs, and ends with it. A
  // pool outliving its use counts against the cores: once a process's pools hold more threads
  // than there are cores, libgomp's idle threads sleep almost at once instead of polling, and
  // every parallel region must wake them (the 2-thread run measured at 2.5x its profile on the
  // 2-core VM).
  const auto on_own_thread = [&](const std::vector<int>& cpus, int threads, const auto& job) {
    auto result = std::async(std::launch::async, [&] {
                    if (!cpus.empty()) pin_this_thread(cpus);
                    at::internal::lazy_init_num_threads();
                    at::set_num_threads(threads);
                    return job();
                  }).get();
    at::set_num_threads(p.threads_per_stage);  // ATen's default for new threads, which the pool set
    return result;
  };

  // 0. With bind_cores, each device gets cores of its own, and the plan each block's speed: the
  // plain model's pass (its layers' forward and backward summed) timed on every block in turn,
  // rounds interleaved. The fastest block is the first device, the plain model's, and profiles.
  // The blocks are timed again once the profile is taken, nearer the runs, and the plan uses
  // every round (speeds_round_by_round): a core's speed can change within a minute.
  profiler::ProfileOptions calibrate;
  calibrate.warmup = 1;
  calibrate.repeat = 2;
  calibrate.measure_engine = false;
  // The plain model's pass on the calling thread, its layers' forward and backward summed.
  const auto time_here = [&] {
    double ms = 0;
    for (const profiler::LayerProfile& layer : profile_plain(calibrate).layers) {
      ms += layer.forward_ms + layer.backward_ms;
    }
    return ms;
  };
  const auto time_on = [&](const std::vector<int>& cpus) {
    return on_own_thread(cpus, p.threads_per_stage, time_here);
  };
  // kCoreSpeedRounds more rounds of every block in `blocks`, appended to `times`.
  const auto time_blocks = [&](const std::vector<std::vector<int>>& blocks,
                               std::vector<std::vector<double>>& times) {
    times.resize(blocks.size());
    for (int round = 0; round < kCoreSpeedRounds; ++round) {
      for (size_t d = 0; d < blocks.size(); ++d) times[d].push_back(time_on(blocks[d]));
    }
  };
  std::optional<CoreSpeeds> device_cores;
  std::vector<int> first_device_cpus, every_device_cpu;  // empty: not pinned
  if (p.bind_cores) {
    const std::vector<std::vector<int>> blocks = cores_for_groups(p.devices, p.threads_per_stage);
    say(fmt::format("timing the plain model on each of the {} blocks of {} core{} ...",
                    blocks.size(), p.threads_per_stage, p.threads_per_stage == 1 ? "" : "s"));
    std::vector<std::vector<double>> times;
    time_blocks(blocks, times);
    device_cores = rank_cores(blocks, times);
    std::vector<std::string> named;
    for (size_t d = 0; d < device_cores->cpus.size(); ++d) {
      named.push_back(fmt::format("device {}: CPU {} ({:.1f} ms)", d,
                                  fmt::join(device_cores->cpus[d], ","), device_cores->ms[d]));
    }
    say(fmt::format("fastest first: {}", fmt::join(named, "; ")));
    first_device_cpus = device_cores->cpus.front();
    for (const std::vector<int>& block : device_cores->cpus) {
      every_device_cpu.insert(every_device_cpu.end(), block.begin(), block.end());
    }
    // The profiled layers on the first device, each co-runner on the device of the stage it
    // stands in for, the engine's calibration stages on the first two.
    options.device_cpus = device_cores->cpus;
  }

  // 1. Profile every size, in rounds spread over time; micro-batches that overlap run beside the
  // other stages' work. The honest alternative on CPUs, the plain model with every device's
  // threads, is profiled in each round too.
  std::vector<profiler::Profile> sized_rounds, wide_rounds;
  // One round: every size into `sized` (pinned: on a thread of the first device's), then (`wide`
  // given) the plain model on every device's threads.
  const auto profile_round = [&](const profiler::ProfileOptions& at,
                                 std::vector<profiler::Profile>& sized,
                                 std::vector<profiler::Profile>* wide) {
    const auto every_size = [&] {
      return profile_at_sizes(model, inputs, chunks, p.seed, at, co_runners, beat);
    };
    sized.push_back(first_device_cpus.empty()
                        ? every_size()
                        : on_own_thread(first_device_cpus, p.threads_per_stage, every_size));
    if (!wide) return;
    wide->push_back(
        on_own_thread(every_device_cpu, wide_threads, [&] { return profile_plain(at); }));
  };
  for (int round = 1; round <= rounds; ++round) {
    say(fmt::format("profiling {} at micro-batch sizes for {} chunks{}{} ...", p.model,
                    fmt::join(chunks, ", "),
                    profile_wide ? fmt::format(" and on {} threads", wide_threads) : "",
                    rounds > 1 ? fmt::format(" (round {} of {})", round, rounds) : ""));
    if (round == 2) options.warmup = 1;  // caches and allocator pools are warm
    profile_round(options, sized_rounds, profile_wide ? &wide_rounds : nullptr);
  }
  profiler::Profile profile = profiler::merge_profiles(sized_rounds);
  if (!p.inputs.empty()) profile.inputs = models::to_strings(inputs);
  write_file_atomically(output.staging() + "/profile.json",
                        profiler::profile_to_json(profile).dump(2) + "\n");
  std::optional<profiler::Profile> wide;
  if (profile_wide) {
    wide = profiler::merge_profiles(wide_rounds);
    write_file_atomically(output.staging() + "/profile-threads.json",
                          profiler::profile_to_json(*wide).dump(2) + "\n");
  }

  // The devices' speeds from their rounds before the profile and after it.
  if (device_cores) {
    say("timing the blocks again ...");
    time_blocks(device_cores->cpus, device_cores->times_ms);
    device_cores->speeds = speeds_round_by_round(device_cores->times_ms);
    std::vector<std::string> named;
    for (size_t d = 0; d < device_cores->cpus.size(); ++d) {
      named.push_back(fmt::format("device {}: CPU {} (speed {:.2f})", d,
                                  fmt::join(device_cores->cpus[d], ","), device_cores->speeds[d]));
    }
    say(fmt::format("planning with {}, from {} rounds", fmt::join(named, "; "),
                    device_cores->times_ms.front().size()));
  }

  // 2. Plan, and cost the user's own configuration the same way.
  const balance::CostProfile costs = profiler::cost_profile(profile);
  balance::PlanSearch search;
  search.devices = p.devices;
  search.schedules = p.schedules;
  search.checkpoints = p.checkpoints;
  search.keep_dominated = p.top == 0;
  search.min_gain = p.min_gain;
  if (device_cores) search.costs.device_speeds = device_cores->speeds;
  if (wide) search.plain_profiles.push_back(profiler::cost_profile(*wide));
  const balance::PlanSearchResult result = balance::search_plans(costs, search);
  balance::write_plan(output.staging() + "/plan.json", result.recommendation().plan);
  std::vector<CheckedConfiguration> list;
  add(list, result.recommendation(), "recommended");  // first: the pick
  const int top = p.top == 0 ? static_cast<int>(result.ranked.size()) : p.top;
  for (int k = 0; k < top && k < static_cast<int>(result.ranked.size()); ++k) {
    add(list, result.ranked[k], fmt::format("plan {}", k + 1));
  }
  add(list, result.plain, "plain");
  for (const balance::Configuration& c : result.ranked) {
    if (c.threads_per_stage > 1) {
      add(list, c, fmt::format("plain, {} threads", c.threads_per_stage));
      break;
    }
  }
  if (p.user) {
    balance::Configuration shape_of;
    shape_of.stages = p.user->stages;
    shape_of.chunks = p.user->chunks;
    shape_of.schedule = p.user->schedule;
    shape_of.checkpoint = p.user->checkpoint;
    const auto yours = balance::configure(costs, search.costs, shape_of, result.plain);
    if (!yours) throw std::logic_error("your configuration does not fit unlimited memory");
    add(list, *yours, "yours");
  }

  // 3. Train them all side by side.
  std::vector<TrainSettings> runs;
  for (const CheckedConfiguration& c : list) {
    runs.push_back(train_settings(
        p, inputs, c.config, device_cores ? device_cores->cpus : std::vector<std::vector<int>>{}));
  }
  say(fmt::format("training {} configurations, step by step in turns{} ...", runs.size(),
                  p.profile_in_turns ? ", profiling after each round" : ""));
  // Each round in turns starts where the other runs' turns left caches, pools and threads cold:
  // whole passes warm them first, as each measured step's rehearsal does.
  profiler::ProfileOptions in_turns = options;
  in_turns.warmup = 3;
  in_turns.repeat = 2;
  std::vector<profiler::Profile> in_turns_rounds, wide_in_turns_rounds;
  // The plain model on several threads is profiled on the thread of the run that trains it, with
  // that run's pool: a pool of its own beside the runs' would push the process past the cores,
  // and its threads would sleep between parallel regions, measuring it far slower than it runs.
  // Its engine costs come from the profile taken up front (measuring them would start a pool).
  const int wide_run = wide ? plain_on_threads_index(list, wide_threads) : -1;
  profiler::ProfileOptions wide_in_turns = in_turns;
  wide_in_turns.measure_engine = false;
  // The devices' cores are timed in turns likewise, on the stage threads of a run with one stage
  // on each device (pinned there), with that run's pools, where the list has one.
  const int spread_run = device_cores ? one_stage_per_device_index(list, p.devices) : -1;
  AfterRound profile_in_turns;
  std::vector<std::vector<double>> times_in_turns(device_cores ? device_cores->cpus.size() : 0);
  std::vector<double> speeds_in_turns;
  if (p.profile_in_turns) {
    profile_in_turns = [&](int, const std::vector<TrainingRun*>& alive) {
      profile_round(in_turns, in_turns_rounds, nullptr);
      if (device_cores) {  // the cores' speeds may have changed too
        for (size_t d = 0; d < device_cores->cpus.size(); ++d) {
          if (spread_run < 0) {
            times_in_turns[d].push_back(time_on(device_cores->cpus[d]));
          } else {
            alive[static_cast<size_t>(spread_run)]->run_on_stage_thread(
                static_cast<int>(d), [&] { times_in_turns[d].push_back(time_here()); });
          }
        }
      }
      if (wide_run < 0) return;
      alive[static_cast<size_t>(wide_run)]->run_on_stage_thread(
          0, [&] { wide_in_turns_rounds.push_back(profile_plain(wide_in_turns)); });
    };
  }
  const std::vector<reports::RunRecord> measured = run_interleaved(runs, profile_in_turns);
  if (p.profile_in_turns) {
    const profiler::Profile sized = profiler::merge_profiles(in_turns_rounds);
    write_file_atomically(output.staging() + "/profile-in-turns.json",
                          profiler::profile_to_json(sized).dump(2) + "\n");
    std::optional<profiler::Profile> wide_pooled;
    if (!wide_in_turns_rounds.empty()) {
      wide_pooled = profiler::merge_profiles(wide_in_turns_rounds);
      wide_pooled->engine = wide->engine;
      write_file_atomically(output.staging() + "/profile-threads-in-turns.json",
                            profiler::profile_to_json(*wide_pooled).dump(2) + "\n");
    }
    balance::CostOptions costs_in_turns = search.costs;
    if (device_cores) {  // each device's speed over the first's, from the same rounds
      speeds_in_turns = speeds_round_by_round(times_in_turns);
      costs_in_turns.device_speeds = speeds_in_turns;
    }
    predict_in_turns(list, sized, wide_pooled, costs_in_turns);
  }
  std::vector<double> predicted_ms, measured_ms;
  for (size_t k = 0; k < list.size(); ++k) {
    for (const reports::StepSample& step : measured[k].steps) {
      list[k].measured_steps_ms.push_back(step.ms);
    }
    list[k].measured_step_ms = measured[k].median_step_ms;
    predicted_ms.push_back(list[k].config.step_ms);
    measured_ms.push_back(list[k].measured_step_ms);
  }
  const std::vector<int> predicted_rank = reports::ranks_by_time(predicted_ms),
                         measured_rank = reports::ranks_by_time(measured_ms);
  for (size_t k = 0; k < list.size(); ++k) {
    list[k].predicted_rank = predicted_rank[k];
    list[k].measured_rank = measured_rank[k];
  }

  AutoValidation validation;
  validation.device_speeds_in_turns = speeds_in_turns;
  validation.model = model.layers.name();
  validation.input_shape = shape;
  validation.devices = p.devices;
  if (device_cores) {
    validation.device_cpus = device_cores->cpus;
    validation.device_speeds = device_cores->speeds;
    validation.device_times_ms = device_cores->times_ms;
  }
  validation.searched = result.searched;
  validation.configurations = std::move(list);
  write_file_atomically(output.staging() + "/plan-validation.json",
                        auto_validation_to_json(validation).dump(2) + "\n");
  output.commit();
  return validation;
}

}  // namespace pipebal::workflow
