// See plan_command.h.
#include "tools/plan_command.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/planner.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/format_bytes.h"
#include "tools/command_line.h"
#include "tools/common_options.h"
#include "tools/progress.h"

namespace pipebal::tools {
namespace {

using balance::Configuration;

// A search shorter than this shows no progress.
constexpr std::chrono::seconds kSilentSearch{2};

constexpr const char* kFooter =
    "Example:\n"
    "  pipebal profile --model gpt:layers=6 --input-shape 64,64 --chunks 1,2,4,8,16 -o "
    "profile.json\n"
    "  pipebal plan profile.json --devices 2 -o plan.json\n"
    "  pipebal train --plan plan.json -o run.json\n"
    "  pipebal plan profile.json --devices 8 --memory-cap 16G --bandwidth 25GB/s "
    "--data-parallel\n"
    "Micro-batch counts come from the profile's sizes (profile with several --chunks); costs\n"
    "between measured sizes are interpolated. Step times are the simulator's, per mini-batch.\n"
    "Pipelining is recommended only when predicted at least --min-gain percent faster than\n"
    "the best configuration that does not pipeline, and more threads or replicas only when\n"
    "that much faster than one device; the ranking itself is by predicted time.";

balance::PlanSearch plan_search(const PlanParams& params, const balance::CostProfile& profile) {
  balance::PlanSearch search;
  search.devices = params.devices;
  apply_device_params(params.device, profile, params.devices, search.costs);
  search.chunks = params.chunks;
  for (const std::string& name : params.schedules) {
    search.schedules.push_back(pipeline::parse_schedule_kind(name));
  }
  for (const std::string& name : params.checkpoints) {
    search.checkpoints.push_back(pipeline::parse_checkpoint_mode(name));
  }
  search.data_parallel = params.data_parallel;
  search.min_gain = params.min_gain_percent / 100;
  for (const std::string& path : params.plain_profiles) {
    search.plain_profiles.push_back(balance::read_profile(path));
    // The thread count is what the plain model is weighed on: one the profile does not give
    // in range (the reader leaves it 0) cannot be guessed.
    if (search.plain_profiles.back().threads == 0) {
      throw std::invalid_argument(fmt::format(
          "--plain-profile {}: environment.intra_op_threads does not give its thread count (1 to "
          "4096): make it with pipebal profile --threads N",
          path));
    }
  }
  return search;
}

void print_row(const std::string& rank, const Configuration& c, bool replicas, std::ostream& out) {
  out << fmt::format(
      "{:>5} {:>6}{} {:>6} {:<9} {:<11} {:>11.3f} {:>10.1f} {:>8.2f}x {:>6.1f}% "
      "{:>11}  [{}]{}\n",
      rank, c.stages, replicas ? fmt::format(" {:>8}", c.replicas) : "", c.chunks,
      c.virtual_stages > 1 ? fmt::format("interl. {}", c.virtual_stages)
                           : pipeline::to_string(c.schedule),
      pipeline::to_string(c.checkpoint), c.step_ms, c.samples_per_s, c.speedup,
      100.0 * c.plan.prediction.bubble_fraction, format_bytes(c.peak_bytes),
      fmt::join(c.plan.balance, ","),
      (c.threads_per_stage > 1 ? fmt::format(" on {} threads", c.threads_per_stage)
                               : std::string()) +
          (c.costs == balance::CostSource::kMeasured
               ? std::string()
               : fmt::format("  ({})", balance::to_string(c.costs))));
}

void print_table(const PlanParams& params, const balance::CostProfile& profile,
                 const balance::PlanSearchResult& result, std::ostream& out) {
  out << fmt::format(
      "{}{} layers, mini-batch {}, {} device{}: {} configurations searched{}\n",
      profile.model.empty() ? "" : printable(profile.model) + ": ", profile.layers.size(),
      profile.mini_batch_size(), params.devices, params.devices > 1 ? "s" : "", result.searched,
      result.over_memory > 0 ? fmt::format(", {} over the memory caps", result.over_memory) : "");
  if (result.one_size) {
    out << "the profile measured one micro-batch size, so only its micro-batch count was "
           "searched (and the plain model, extrapolated): profile with --chunks 1,2,4,8 to search "
           "counts\n";
  }
  out << measured_link_note(params.device, profile);
  out << fmt::format(
      "\n{:>5} {:>6}{} {:>6} {:<9} {:<11} {:>11} {:>10} {:>9} {:>7} {:>11}  {}\n", "rank", "stages",
      params.data_parallel ? fmt::format(" {:>8}", "replicas") : "", "chunks", "schedule",
      "checkpoint", "step ms", "samples/s", "speed-up", "bubble", "peak memory", "balance");
  const size_t shown = std::min<size_t>(result.ranked.size(), std::max(params.top, 1));
  for (size_t k = 0; k < shown; ++k) {
    print_row(std::to_string(k + 1), result.ranked[k], params.data_parallel, out);
  }
  if (result.recommended >= shown) {
    print_row(std::to_string(result.recommended + 1), result.recommendation(), params.data_parallel,
              out);
  }
  print_row("plain", result.plain, params.data_parallel, out);
  if (!result.plain.plan.fits_memory()) out << "(the plain model does not fit one device's cap)\n";
  if (result.dominated > 0) {
    out << fmt::format(
        "{} configuration{} left out: no faster than a ranked one of the same stages and "
        "micro-batches that holds no more\n",
        result.dominated, result.dominated > 1 ? "s" : "");
  }
  for (const pipeline::ScheduleKind schedule : result.dominated_schedules) {
    out << fmt::format(
        "{}: none ranked: another schedule or checkpoint mode does as well as each of its "
        "configurations with no more memory\n",
        pipeline::to_string(schedule));
  }
  if (!result.interleaved_not_searched.empty()) {
    out << "interleaved: not searched: it " << result.interleaved_not_searched << "\n";
  }

  const Configuration& best = result.recommendation();
  out << "\n";
  if (result.recommended > 0) {
    const Configuration& fastest = result.ranked.front();
    out << fmt::format(
        "{} does not pay enough here: {} is predicted fastest, but only {:.1f}% faster "
        "than {} (--min-gain {}%), which pipebal recommends: {:.3f} ms per step, {:.2f}x the "
        "plain model\n",
        fastest.stages > 1 ? "pipelining" : "using more devices", balance::describe(fastest),
        100 * (best.step_ms / fastest.step_ms - 1), balance::describe(best),
        params.min_gain_percent, best.step_ms, best.speedup);
  } else if (best.stages == 1 && best.chunks == 1 && best.replicas == 1 &&
             best.threads_per_stage <= 1) {
    if (params.devices == 1) {
      out << "the plain model is predicted fastest on one device (a pipeline needs --devices 2 "
             "or more)\n";
    } else {
      out << "pipelining does not pay here: the plain model on one device is predicted fastest; "
             "use the devices for something else, or for data parallelism (--data-parallel)\n";
    }
  } else if (best.stages == 1 && (best.replicas > 1 || best.threads_per_stage > 1)) {
    out << fmt::format(
        "pipelining does not pay here: {} is predicted fastest ({:.2f}x the plain "
        "model)\n",
        balance::describe(best), best.speedup);
  } else {
    out << fmt::format("recommended: {}: {:.3f} ms per step, {:.2f}x the plain model\n",
                       balance::describe(best), best.step_ms, best.speedup);
  }
}

nlohmann::json configuration_to_json(const Configuration& c) {
  return {{"stages", c.stages},
          {"replicas", c.replicas},
          {"chunks", c.chunks},
          {"threads_per_stage", c.threads_per_stage},
          {"devices", c.devices},
          {"schedule", pipeline::to_string(c.schedule)},
          {"checkpoint", pipeline::to_string(c.checkpoint)},
          {"micro_batch_size", c.micro_batch_size},
          {"costs", balance::to_string(c.costs)},
          {"balance", c.plan.balance},
          {"step_ms", c.step_ms},
          {"samples_per_s", c.samples_per_s},
          {"speedup", c.speedup},
          {"bubble_fraction", c.plan.prediction.bubble_fraction},
          {"peak_bytes", c.peak_bytes}};
}

std::vector<std::string> schedule_names(const std::vector<pipeline::ScheduleKind>& schedules) {
  std::vector<std::string> names;
  for (const pipeline::ScheduleKind schedule : schedules) {
    names.push_back(pipeline::to_string(schedule));
  }
  return names;
}

nlohmann::json result_to_json(const PlanParams& params, const balance::PlanSearchResult& result) {
  nlohmann::json ranked = nlohmann::json::array();
  const size_t shown = std::min<size_t>(result.ranked.size(), std::max(params.top, 1));
  for (size_t k = 0; k < shown; ++k) ranked.push_back(configuration_to_json(result.ranked[k]));
  nlohmann::json doc = {{"devices", params.devices},
                        {"searched", result.searched},
                        {"over_memory", result.over_memory},
                        {"dominated", result.dominated},
                        {"dominated_schedules", schedule_names(result.dominated_schedules)},
                        {"plain", configuration_to_json(result.plain)},
                        {"ranked", std::move(ranked)},
                        {"recommended_rank", result.recommended + 1},
                        {"recommended", balance::plan_to_json(result.recommendation().plan)}};
  if (!result.interleaved_not_searched.empty()) {
    doc["interleaved_not_searched"] = "it " + result.interleaved_not_searched;
  }
  return doc;
}

}  // namespace

void run_plan(const PlanParams& params, std::ostream& out) {
  if (params.top < 1) throw std::invalid_argument("--top must be at least 1");
  const balance::CostProfile profile = balance::read_profile(params.profile_path);
  std::vector<NamedPath> inputs = {{"the profile", params.profile_path}};
  for (const std::string& path : params.plain_profiles) inputs.push_back({"--plain-profile", path});
  check_outputs_apart(inputs, {{"-o", params.output_path}});
  if (!params.output_path.empty()) check_writable(params.output_path);  // before the search
  balance::PlanSearch search = plan_search(params, profile);
  // Most searches take milliseconds: progress shows only once one has taken a while.
  Progress progress(std::cerr, Progress::mode_for_stderr(params.quiet), kSilentSearch);
  search.on_progress = [&progress](size_t done, size_t total) {
    progress.update("configurations costed", done, total);
  };
  const balance::PlanSearchResult result = balance::search_plans(profile, search);
  progress.finish();
  for (const int threads : result.plain_threads_not_weighed) {
    std::cerr << fmt::format(
        "{}a --plain-profile measured on {} thread{} was not weighed: {}\n", warning_prefix(),
        threads, threads == 1 ? "" : "s",
        threads < 2 ? std::string("the plain model on several threads needs a profile made with "
                                  "--threads 2 or more")
                    : fmt::format("it needs {} devices, --devices is {}", threads, params.devices));
  }
  warn_if_profiled_busy(profile.machine_load, params.profile_path, std::cerr);
  for (size_t i = 0; i < params.plain_profiles.size(); ++i) {
    warn_if_profiled_busy(search.plain_profiles[i].machine_load, params.plain_profiles[i],
                          std::cerr);
  }
  if (!params.output_path.empty()) {
    balance::write_plan(params.output_path, result.recommendation().plan);
  }
  if (params.format == "json") {
    out << result_to_json(params, result).dump(2) << "\n";
    return;
  }
  print_table(params, profile, result, out);
  if (!params.output_path.empty()) out << "wrote " << printable(params.output_path) << "\n";
}

void add_plan_command(CLI::App& app) {
  auto params = std::make_shared<PlanParams>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Choose how to run a profiled model on N devices: stage count (1: do not pipeline),\n"
      "micro-batches, schedule, checkpointing (and replicas), each balanced by dp and judged by\n"
      "the simulator; prints the best beside the plain model and writes the best as plan.json.");
  sub->footer(kFooter);
  sub->add_option("profile", params->profile_path, "Cost profile (pipebal.profile/1 JSON)")
      ->required();
  sub->add_option("--devices,-n", params->devices, "Devices available (at most this many stages)")
      ->required();
  add_device_options(*sub, params->device);
  sub->add_option("--chunks,-m", params->chunks,
                  "Micro-batch counts to consider (default: every count dividing the mini-batch "
                  "into sizes the profile spans); a count that does not divide it is costed at "
                  "its micro-batches rounded up, one outside the profiled sizes extrapolated")
      ->delimiter(',');
  sub->add_option(
         "--schedules", params->schedules,
         "Schedules to consider (default: gpipe,1f1b; interleaved, with 2 and 3 stages per device, "
         "and zb-h1 when listed)")
      ->delimiter(',')
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  sub->add_option("--checkpoints", params->checkpoints,
                  "Checkpoint modes to consider (default: never,except_last,always)")
      ->delimiter(',')
      ->check(CLI::IsMember({"always", "except_last", "never"}));
  sub->add_option("--plain-profile", params->plain_profiles,
                  "A profile of the same model and batch made with more threads (profile "
                  "--chunks 1 --threads T): the plain model on T threads, using T devices, is "
                  "then a candidate (on CPUs, the honest alternative to T stages)");
  auto* data_parallel =
      sub->add_flag("--data-parallel", params->data_parallel,
                    "Also consider replicas of the pipeline trained data-parallel (one process per "
                    "device: pipebal launch)");
  // Without replicas there is no all-reduce to price: refused, not ignored.
  sub->get_option("--allreduce-bandwidth")->needs(data_parallel);
  sub->add_option("--min-gain", params->min_gain_percent,
                  "Recommend pipelining only when predicted at least this many percent faster "
                  "than the best configuration that does not pipeline, and the plain model on "
                  "several devices only when this much faster than on one (a profile does not "
                  "see all that more devices cost)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  sub->add_option("--top", params->top, "Configurations to list")->capture_default_str();
  sub->add_option("--format", params->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  sub->add_option("-o,--output", params->output_path,
                  "Write the recommended configuration here (pipebal.plan/1, for train --plan)");
  sub->add_flag("-q,--quiet", params->quiet, "No progress on stderr (shown after 2 s of search)");
  sub->callback([params]() { run_plan(*params, std::cout); });
}

}  // namespace pipebal::tools
