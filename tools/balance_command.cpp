// See balance_command.h.
#include "tools/balance_command.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/partition.h"
#include "pipebal/balance/plan.h"
#include "pipebal/balance/planner.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/balance/units.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "tools/command_line.h"
#include "tools/common_options.h"

namespace pipebal::tools {
namespace {

using balance::Plan;

constexpr const char* kFooter =
    "Examples (a --chunks other than the profile's needs a profile measured at that size, or at\n"
    "several: pipebal profile --chunks 1,2,4,8):\n"
    "  pipebal balance profile.json --stages 4 --chunks 8 --memory-cap 8G -o plan.json\n"
    "  pipebal balance profile.json --stages 3 --device-speeds 1,1,0.5 --bandwidth 10GB/s "
    "--compare\n"
    "  pipebal balance profile.json --stages 2 --format pippy   # for a Python pipeline\n"
    "  pipebal balance profile.json --stages 2 --schedule interleaved --virtual 2 --chunks 4\n"
    "  pipebal balance profile.json --stages 4 --schedule zb-h1 --chunks 8   # W delays within "
    "1F1B's memory\n"
    "  pipebal balance profile.json --stages 2 --balance 5,7   # predict your own partition\n"
    "  pipebal balance profile.json --stages 2 --schedule-plans plans/   # one plan per schedule\n"
    "Sizes: K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000.";

balance::CostOptions cost_options(const BalanceParams& params,
                                  const balance::CostProfile& profile) {
  balance::CostOptions options;
  options.schedule = params.schedule;
  options.virtual_stages = stages_per_device(params.schedule, params.virtual_stages);
  if (!params.weight_delays.empty()) {
    options.weight_delays = parse_weight_delays(params.weight_delays);
  }
  options.checkpoint = params.checkpoint;
  options.chunks = balance::planned_chunks(profile, params.chunks);
  apply_device_params(params.devices, profile, params.stages, options);
  options.replicas = params.replicas;
  return options;
}

std::string layer_range(const balance::StagePlan& stage) {
  return fmt::format("{}-{} ({})", stage.first_layer, stage.first_layer + stage.layers - 1,
                     stage.layers);
}

void print_table(const Plan& plan, const balance::CostModel& model, std::ostream& out) {
  const auto& layers = model.layers();
  out << fmt::format("{}{} layers into {} stage{}: {} schedule, {} micro-batch{}, checkpoint {}\n",
                     plan.model.empty() ? "" : printable(plan.model) + ": ", layers.size(),
                     plan.stages.size(), plan.stages.size() == 1 ? "" : "s",
                     pipeline::to_string(plan.schedule), plan.chunks, plan.chunks == 1 ? "" : "es",
                     pipeline::to_string(plan.checkpoint));
  if (plan.virtual_stages > 1) {
    out << fmt::format("{} devices of {} stages each: device d holds stages d, d + {}, ...\n",
                       plan.stages.size() / plan.virtual_stages, plan.virtual_stages,
                       plan.stages.size() / plan.virtual_stages);
  }
  if (!plan.weight_delays.empty()) {
    out << fmt::format(
        "W delays [{}]: each stage runs a micro-batch's W that many B's after its own (-1: its "
        "backward whole)\n",
        fmt::join(plan.weight_delays, ","));
  }
  out << fmt::format(
      "algorithm {}, balance [{}]{}\n\n", plan.algorithm, fmt::join(plan.balance, ","),
      plan.search_nodes == 0 ? ""
      : plan.search_exhaustive
          ? fmt::format(" (the smallest simulated step: {} prefixes searched)", plan.search_nodes)
          : fmt::format(" (the best of {} prefixes searched; not proven optimal)",
                        plan.search_nodes));
  out << fmt::format("{:>5}  {:<16} {:>6} {:>12} {:>12} {:>11} {:>11} {:>7}\n", "stage", "layers",
                     "speed", "time/mb", "transfer", "memory", "cap", "share");
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const balance::StagePlan& stage = plan.stages[s];
    const double share = plan.bottleneck_ms > 0
                             ? model.cost_ms(static_cast<int>(s), stage.first_layer,
                                             stage.first_layer + stage.layers) /
                                   plan.bottleneck_ms
                             : 1.0;
    const bool over = stage.timed_memory_bytes > stage.memory_cap_bytes;
    out << fmt::format("{:>5}  {:<16} {:>6.2f} {:>9.3f} ms {:>9.3f} ms {:>11} {:>11} {:>6.1f}%{}\n",
                       s, layer_range(stage), stage.speed, stage.time_ms, stage.transfer_ms,
                       format_bytes(stage.timed_memory_bytes),
                       stage.memory_cap_bytes == balance::kUnlimitedBytes
                           ? "-"
                           : format_bytes(stage.memory_cap_bytes),
                       100.0 * share, over ? "  over cap" : "");
  }
  std::vector<std::string> waiting;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const balance::StagePlan& stage = plan.stages[s];
    if (stage.timed_memory_bytes == stage.memory_bytes) continue;
    waiting.push_back(
        fmt::format("stage {} {}", s, format_bytes(stage.timed_memory_bytes - stage.memory_bytes)));
  }
  if (!waiting.empty()) {
    out << fmt::format(
        "memory includes the messages a stage sent that wait for their receiver: {}\n",
        fmt::join(waiting, ", "));
  }
  const balance::Prediction& p = plan.prediction;
  if (plan.replicas > 1) {
    std::vector<std::string> times;
    for (const auto& stage : plan.stages)
      times.push_back(fmt::format("{:.3f}", stage.allreduce_ms));
    out << fmt::format(
        "\n{} replicas: each stage all-reduces its gradients once per step at {}: "
        "[{}] ms\n",
        plan.replicas,
        plan.allreduce_bytes_per_ms > 0 ? balance::format_bandwidth(plan.allreduce_bytes_per_ms)
                                        : "no cost (give --allreduce-bandwidth)",
        fmt::join(times, ", "));
  }
  // The stage that sets the bottleneck, its parts shown so that they add up to it.
  size_t slowest = 0;
  std::vector<double> costs;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const balance::StagePlan& stage = plan.stages[s];
    costs.push_back(
        model.cost_ms(static_cast<int>(s), stage.first_layer, stage.first_layer + stage.layers));
    if (costs[s] > costs[slowest]) slowest = s;
  }
  const balance::StagePlan& bottleneck = plan.stages[slowest];
  const double engine_ms = model.overhead_ms(static_cast<int>(slowest));
  out << fmt::format(
      "\nbottleneck {:.3f} ms per micro-batch, stage {}'s: time {:.3f} + outgoing transfer "
      "{:.3f}{}{}\n",
      plan.bottleneck_ms, slowest, bottleneck.time_ms, bottleneck.transfer_ms,
      engine_ms > 0 ? fmt::format(" + the engine's actions {:.3f}", engine_ms) : "",
      plan.replicas > 1 ? fmt::format(" + all-reduce {:.3f} / {} micro-batches",
                                      bottleneck.allreduce_ms, plan.chunks)
                        : "");
  out << fmt::format(
      "predicted step {:.3f} ms with {} micro-batch{}, {:.3f} ms unpipelined (1 micro-batch): "
      "speed-up {:.2f}x, bubble {:.1f}%\n",
      p.step_ms, p.chunks, p.chunks == 1 ? "" : "es", p.naive_step_ms, p.speedup,
      100.0 * p.bubble_fraction);
}

// The plan in the terms of a Python pipeline library: torchgpipe's balance list (layers per
// stage), or torch.distributed.pipelining's split points (each stage after the first begins at
// the layer it names). Python literals, for a script to paste or parse.
// What a Python pipeline takes: torchgpipe's balance list, or torch.distributed.pipelining's
// split points, each naming the layer that begins a stage. Throws when a split point cannot name
// exactly one layer.
std::string for_python(const Plan& plan, const std::string& format) {
  if (format == "torchgpipe") return fmt::format("balance = [{}]\n", fmt::join(plan.balance, ", "));
  const std::vector<std::string> names = plan.layer_names();
  if (names.empty())
    throw std::invalid_argument("the profile does not name every layer: no split points");
  std::vector<std::string> points;
  int first = 0;
  for (size_t s = 0; s + 1 < plan.stages.size(); ++s) {
    first += plan.stages[s].layers;
    const std::string& name = names[first];
    const auto same = std::count(names.begin(), names.end(), name);
    if (same > 1) {
      throw std::invalid_argument(fmt::format(
          "stage {} begins at layer {}, \"{}\", but {} layers have that name: a split point must "
          "name one layer (give the profile's layers distinct names)",
          s + 1, first, name, same));
    }
    // A JSON string is a Python string literal: quotes and backslashes in a name are escaped.
    points.push_back(fmt::format("{}: SplitPoint.BEGINNING", nlohmann::json(name).dump()));
  }
  return fmt::format("split_spec = {{{}}}\n", fmt::join(points, ", "));
}

void print_comparison(const balance::CostModel& model, const Plan& dp_plan, std::ostream& out) {
  out << fmt::format("\n{:<15} {:>14} {:>8} {:>13} {:>9} {:>7}  {}\n", "algorithm", "bottleneck",
                     "vs dp", "step", "speed-up", "memory", "balance");
  for (balance::Algorithm algorithm : balance::all_algorithms()) {
    const Plan plan =
        algorithm == balance::Algorithm::kDp ? dp_plan : balance::partition(model, algorithm);
    out << fmt::format("{:<15} {:>11.3f} ms {:>8.3f} {:>10.3f} ms {:>8.2f}x {:>7}  [{}]\n",
                       plan.algorithm, plan.bottleneck_ms,
                       dp_plan.bottleneck_ms > 0 ? plan.bottleneck_ms / dp_plan.bottleneck_ms : 1.0,
                       plan.prediction.step_ms, plan.prediction.speedup,
                       plan.fits_memory() ? "fits" : "over", fmt::join(plan.balance, ","));
  }
}

// Pipelining pays per micro-batch (transfer latency, recomputation, small micro-batches' lower
// efficiency): say so when the plan is predicted slower than the same balance with the whole
// batch as one micro-batch, or than the plain model on one device, and name the fastest
// configuration `pipebal plan` finds on as many devices.
void warn_if_pipelining_loses(const Plan& plan, const balance::CostProfile& profile,
                              const balance::CostOptions& options, std::ostream& warnings) {
  const balance::Prediction& p = plan.prediction;
  std::string why;
  if (p.chunks >= 2 && p.speedup < 1.0) {
    why = fmt::format(
        "{} micro-batches are predicted slower than 1 on this balance ({:.3f} ms vs "
        "{:.3f} ms, {:.2f}x)",
        p.chunks, p.step_ms, p.naive_step_ms, p.speedup);
  }
  std::optional<balance::PlanSearchResult> search;
  if (profile.mini_batch_size() > 0) {
    balance::PlanSearch on_these_devices;
    on_these_devices.devices = static_cast<int>(plan.stages.size()) / plan.virtual_stages;
    on_these_devices.costs = options;
    // The planner searches gpipe and 1f1b, without zb-h1's W delays.
    on_these_devices.costs.virtual_stages = 1;
    on_these_devices.costs.weight_delays.clear();
    const double plain_ms = balance::plain_model(profile, on_these_devices.costs).step_ms;
    if (why.empty() && p.step_ms > plain_ms * (1 + 1e-9)) {
      why = fmt::format(
          "this plan is predicted slower than the plain model on one device "
          "({:.3f} ms vs {:.3f} ms)",
          p.step_ms, plain_ms);
    }
    // The whole search (every stage count, micro-batch count, schedule and checkpoint mode:
    // seconds on a long model over many devices) only to name what would be faster.
    if (!why.empty()) {
      try {
        search = balance::search_plans(profile, on_these_devices);
      } catch (const std::invalid_argument&) {
        // Nothing to suggest (e.g. no other micro-batch count fits the caps).
      }
    }
  }
  if (why.empty()) return;
  std::string fix = plan.stages.size() > 1
                        ? "train with 1 micro-batch (profile with --chunks 1) or fewer stages"
                        : "train with 1 micro-batch (profile with --chunks 1)";
  // A configuration is named only when it beats this plan and what the warning held up to it.
  const double to_beat = p.chunks >= 2 && p.speedup < 1.0 ? p.naive_step_ms : p.step_ms;
  if (search && search->ranked.front().step_ms < std::min(p.step_ms, to_beat)) {
    const balance::Configuration& best = search->ranked.front();
    fix = fmt::format("`pipebal plan --devices {}` predicts {:.3f} ms for {}",
                      plan.stages.size() / plan.virtual_stages, best.step_ms,
                      balance::describe(best));
  }
  warnings << warning_prefix() << why
           << ": per-micro-batch costs (transfer latency, recomputation, small micro-batches) "
              "outweigh the overlap; "
           << fix << "\n";
}

// What `train --plan` trains: the profile's model, input and dtype.
void name_what_it_trains(Plan& plan, const balance::CostProfile& profile) {
  plan.model = profile.model;
  plan.input_shape = profile.input_shape;
  plan.inputs = profile.inputs;
  plan.dtype = profile.dtype;
}

// The schedules `balance --schedule-plans` compares, in its table's order.
struct ScheduleRow {
  pipeline::ScheduleKind schedule;
  int virtual_stages;
};
constexpr ScheduleRow kScheduleRows[] = {{pipeline::ScheduleKind::kGPipe, 1},
                                         {pipeline::ScheduleKind::kOneFOneB, 1},
                                         {pipeline::ScheduleKind::kInterleaved, 2},
                                         {pipeline::ScheduleKind::kInterleaved, 3},
                                         {pipeline::ScheduleKind::kZeroBubbleH1, 1}};

std::string row_name(const ScheduleRow& row) {
  return row.virtual_stages > 1 ? fmt::format("interleaved {}", row.virtual_stages)
                                : pipeline::to_string(row.schedule);
}

// Where --schedule-plans writes a row's plan: DIR/<schedule>.json.
std::string schedule_plan_file(const std::string& dir, const ScheduleRow& row) {
  std::string file = row_name(row);
  std::replace(file.begin(), file.end(), ' ', '-');
  return (std::filesystem::path(dir) / (file + ".json")).string();
}

// The same devices and micro-batches under each schedule, each with its own dp balance: the
// step, the speed-up over one micro-batch, the bubble and the busiest device's peak memory (a
// device holds several stages under interleaving). With params.schedule_plans_dir, each plan is
// written there as <schedule>.json once all are made (an interrupted search writes none), and a
// schedule without a plan this time loses the file an earlier run wrote for it, so that the
// directory never mixes two runs' plans.
void print_schedule_comparison(const balance::CostProfile& profile, const BalanceParams& params,
                               std::ostream& out) {
  std::vector<std::pair<std::string, Plan>> plans;  // to write
  std::vector<std::string> stale;                   // files of schedules without a plan
  out << fmt::format("\n{:<15} {:>6} {:>13} {:>9} {:>7} {:>12}  {}\n", "schedule", "stages", "step",
                     "speed-up", "bubble", "device peak", "balance");
  for (const ScheduleRow& row : kScheduleRows) {
    const std::string name = row_name(row);
    BalanceParams variant = params;
    variant.schedule = row.schedule;
    variant.virtual_stages = row.virtual_stages;
    // --weight-delays are zb-h1's: the other schedules are compared as they run without them.
    if (row.schedule != pipeline::ScheduleKind::kZeroBubbleH1) variant.weight_delays.clear();
    try {
      const balance::CostOptions options = cost_options(variant, profile);
      const balance::CostModel model =
          balance::cost_model_for(profile, params.stages * row.virtual_stages, options);
      Plan plan = balance::partition(model, balance::Algorithm::kDp);
      if (!params.schedule_plans_dir.empty()) {
        name_what_it_trains(plan, profile);
        plans.emplace_back(schedule_plan_file(params.schedule_plans_dir, row), plan);
      }
      const std::vector<int64_t> device_bytes = plan.device_timed_memory_bytes();
      out << fmt::format("{:<15} {:>6} {:>10.3f} ms {:>8.2f}x {:>6.1f}% {:>12}  [{}]\n", name,
                         plan.stages.size(), plan.prediction.step_ms, plan.prediction.speedup,
                         100 * plan.prediction.bubble_fraction,
                         format_bytes(*std::max_element(device_bytes.begin(), device_bytes.end())),
                         fmt::join(plan.balance, ","));
    } catch (const std::invalid_argument& error) {
      out << fmt::format("{:<15} {}\n", name, error.what());
      if (!params.schedule_plans_dir.empty()) {
        stale.push_back(schedule_plan_file(params.schedule_plans_dir, row));
      }
    }
  }
  std::vector<std::string> written, removed;
  for (const auto& [path, plan] : plans) {
    balance::write_plan(path, plan);
    written.push_back(path);
  }
  for (const std::string& path : stale) {
    // Only a plan an earlier run wrote: a file of the user's by that name stays.
    std::error_code error;
    if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, error))) continue;
    try {
      balance::read_plan(path);
    } catch (const std::exception&) {
      continue;
    }
    if (std::filesystem::remove(path, error)) removed.push_back(path);
  }
  if (!written.empty()) {
    out << fmt::format(
        "\nwrote {}\nmeasure them side by side: pipebal validate --plans {} -o DIR\n",
        printable(fmt::format("{}", fmt::join(written, ", "))),
        files_in(params.schedule_plans_dir, {"*.json"}));
  }
  if (!removed.empty()) {
    out << fmt::format("removed {}, an earlier run's plan for a schedule without one now\n",
                       printable(fmt::format("{}", fmt::join(removed, ", "))));
  }
}

// A line saying so when the plan's costs are not a measured size's but interpolated, or scaled
// from the nearest one measured.
std::string interpolation_note(const balance::CostProfile& profile, int chunks) {
  const int64_t mini = profile.mini_batch_size();
  if (mini <= 0) return "";
  const int64_t size = balance::micro_batch_size(mini, chunks);
  const balance::CostSource source = balance::costs_at_micro_batch_size(profile, size).source;
  const std::vector<int64_t> sizes = balance::measured_sizes(profile);
  if (source == balance::CostSource::kExtrapolated) {
    const int64_t nearest = size < sizes.front() ? sizes.front() : sizes.back();
    return fmt::format(
        "costs at {} samples per micro-batch: extrapolated in proportion from the profiled {}\n",
        size, nearest);
  }
  if (source != balance::CostSource::kInterpolated) return "";
  const auto above = std::lower_bound(sizes.begin(), sizes.end(), size);
  return fmt::format(
      "costs at {} samples per micro-batch: interpolated between the profiled {} "
      "and {}\n",
      size, *(above - 1), *above);
}

}  // namespace

void run_balance(const BalanceParams& params, std::ostream& out, std::ostream& warnings) {
  const balance::CostProfile profile = balance::read_profile(params.profile_path);
  std::vector<NamedPath> outputs = {{"-o", params.output_path}};
  if (!params.schedule_plans_dir.empty()) {
    for (const ScheduleRow& row : kScheduleRows)
      outputs.push_back({"--schedule-plans", schedule_plan_file(params.schedule_plans_dir, row)});
  }
  check_outputs_apart({{"the profile", params.profile_path}}, outputs);
  if (!params.output_path.empty()) check_writable(params.output_path);  // before the search
  const balance::CostOptions options = cost_options(params, profile);
  if (!params.schedule_plans_dir.empty() && (params.json || params.format != "table")) {
    throw std::invalid_argument(
        "--schedule-plans prints the schedule table beside the plans it writes: drop --json and "
        "--format");
  }
  if (params.compare && (params.json || params.format != "table")) {
    throw std::invalid_argument(
        "--compare prints tables beside the plan's, not in JSON or Python: drop --json and "
        "--format");
  }
  // Made by this run, the directory is removed again should the run fail before writing into it.
  struct RemovedIfLeftEmpty {
    std::string dir;
    ~RemovedIfLeftEmpty() {
      std::error_code error;
      if (!dir.empty() && std::uncaught_exceptions() > 0) std::filesystem::remove(dir, error);
    }
  } made;
  if (!params.schedule_plans_dir.empty()) {
    // The directory itself, as mkdir makes it: a mistyped parent is not made.
    std::error_code error;
    if (std::filesystem::create_directory(params.schedule_plans_dir, error)) {
      made.dir = params.schedule_plans_dir;
    }
    if (error || !std::filesystem::is_directory(params.schedule_plans_dir)) {
      throw std::invalid_argument(fmt::format("--schedule-plans: cannot make the directory '{}'{}",
                                              params.schedule_plans_dir,
                                              error ? ": " + error.message() : ""));
    }
  }

  // Bounded before the product: --virtual is at most 64.
  if (params.stages < 1 || static_cast<size_t>(params.stages) > balance::kMaxLayers) {
    throw std::invalid_argument(
        fmt::format("--stages must be from 1 to {}, got {}", balance::kMaxLayers, params.stages));
  }
  const balance::CostModel model =
      balance::cost_model_for(profile, params.stages * options.virtual_stages, options);
  const balance::Algorithm algorithm = balance::parse_algorithm(params.algorithm);
  Plan plan = params.balance.empty()
                  ? balance::partition(model, algorithm)
                  : balance::plan_balance(model, balance::parse_balance(params.balance), "given");
  name_what_it_trains(plan, profile);
  // zb-h1's W delays as the plan has them (chosen for it, or given and capped at the
  // micro-batches): what its stages are shown and compared with.
  balance::CostOptions planned_options = options;
  if (options.schedule == pipeline::ScheduleKind::kZeroBubbleH1) {
    planned_options.weight_delays = plan.weight_delays;
  }
  const balance::CostModel planned = model.with_options(planned_options);
  const std::string format = params.json ? "json" : params.format;
  const bool python = format == "torchgpipe" || format == "pippy";
  // May refuse: before anything is said or written.
  const std::string python_text = python ? for_python(plan, format) : "";
  warnings << long_weight_delays_warning("--weight-delays", options.weight_delays, options.chunks);
  warn_if_profiled_busy(profile.machine_load, params.profile_path, warnings);
  warn_if_pipelining_loses(plan, profile, planned_options, warnings);
  if (!params.output_path.empty()) balance::write_plan(params.output_path, plan);
  if (format == "json") {
    out << balance::plan_to_json(plan).dump(2) << "\n";
    return;
  }
  if (python) {
    out << python_text;
    return;
  }
  print_table(plan, planned, out);
  out << measured_link_note(params.devices, profile);
  out << interpolation_note(profile, options.chunks);
  if (params.compare) {
    const Plan dp_plan = algorithm == balance::Algorithm::kDp
                             ? plan
                             : balance::partition(model, balance::Algorithm::kDp);
    print_comparison(model, dp_plan, out);
  }
  if (params.compare || !params.schedule_plans_dir.empty()) {
    print_schedule_comparison(profile, params, out);
  }
  if (!params.output_path.empty()) out << "\nwrote " << printable(params.output_path) << "\n";
}

void add_balance_command(CLI::App& app) {
  auto params = std::make_shared<BalanceParams>();
  CLI::App* sub = app.add_subcommand(
      "balance",
      "Partition a profiled model into pipeline stages and predict its step time.\n"
      "Costs are per micro-batch; `dp` minimises the slowest stage (compute + transfer) exactly,\n"
      "under the memory caps and device speeds, then the sum of stage times.");
  sub->footer(kFooter);
  sub->add_option("profile", params->profile_path, "Cost profile (pipebal.profile/1 JSON)")
      ->required();
  sub->add_option("--stages,-n", params->stages,
                  "Number of pipeline stages (devices; with --schedule interleaved the model is "
                  "cut into --virtual times as many)")
      ->required();
  sub->add_option("--chunks,-m", params->chunks,
                  fmt::format("Micro-batches per step (default: the profile's, else {}); must "
                              "give the micro-batch size the profile was measured at",
                              pipeline::kDefaultChunks))
      ->check(given_at_least(1));
  add_schedule_option(*sub, params->schedule);
  add_virtual_stages_option(*sub, params->virtual_stages);
  add_weight_delays_option(*sub, params->weight_delays);
  add_checkpoint_option(*sub, params->checkpoint);
  add_device_options(*sub, params->devices);
  auto* replicas = sub->add_option("--replicas", params->replicas,
                                   "Pipelines trained data-parallel (train --replicas); each "
                                   "stage then all-reduces its gradients once per step")
                       ->capture_default_str();
  // Without replicas there is no all-reduce to price: refused, not ignored.
  sub->get_option("--allreduce-bandwidth")->needs(replicas);
  sub->add_option("--algorithm,-a", params->algorithm, "dp, blockpartition, uniform or parameters")
      ->capture_default_str();
  sub->add_option("--balance", params->balance,
                  "Layers per stage, e.g. 5,7: cost and simulate this partition (algorithm "
                  "'given') instead of choosing one")
      ->excludes("--algorithm");
  sub->add_option("-o,--output", params->output_path, "Write the plan here (pipebal.plan/1)");
  auto* json = sub->add_flag("--json", params->json, "Print the plan JSON (--format json)");
  sub->add_option("--format", params->format,
                  "table, json, torchgpipe (its balance list) or pippy "
                  "(torch.distributed.pipelining split points by layer name)")
      ->check(CLI::IsMember({"table", "json", "torchgpipe", "pippy"}))
      ->capture_default_str()
      ->excludes(json);
  sub->add_flag("--compare", params->compare,
                "Also print every algorithm's bottleneck and predicted step time");
  sub->add_option("--schedule-plans", params->schedule_plans_dir,
                  "Write each schedule's dp plan of the schedule comparison into this directory "
                  "(gpipe.json, 1f1b.json, interleaved-2.json, interleaved-3.json, zb-h1.json), "
                  "to measure them side by side with `pipebal validate --plans DIR/*.json`");
  sub->callback([params]() { run_balance(*params, std::cout, std::cerr); });
}

}  // namespace pipebal::tools
