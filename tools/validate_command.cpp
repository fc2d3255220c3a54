// See validate_command.h.
#include "tools/validate_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/format_bytes.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/reports/validation_record.h"
#include "pipebal/workflow/plan_validation.h"
#include "pipebal/workflow/plans_comparison.h"
#include "pipebal/workflow/validation.h"
#include "tools/command_line.h"
#include "tools/common_options.h"

namespace pipebal::tools {
namespace {

void print_table(const reports::ValidationRecord& record) {
  fmt::print("\n{:<28} {:<14} {:>12} {:>12} {:>7} {:>10} {:>10}\n", "candidate", "balance",
             "predicted", "measured", "error", "pred. x", "meas. x");
  for (const auto& c : record.candidates) {
    fmt::print("{:<28} {:<14} {:>9.1f} ms {:>9.1f} ms {:>+6.1f}% {:>9.2f}x {:>9.2f}x\n",
               fmt::format("{}", fmt::join(c.algorithms, ", ")),
               fmt::format("[{}]", fmt::join(c.balance, ",")), c.predicted.step_ms,
               c.measured.step_ms, 100 * c.step_error(), c.predicted.speedup(),
               c.measured.speedup());
  }
  fmt::print(
      "(speed-up: over the same balance with one micro-batch, i.e. naive model parallelism)\n");
}

// --auto: each configuration trained, predicted and measured, and where the plan's pick landed.
void print_auto_table(const workflow::AutoValidation& v) {
  // The labels' column as wide as its widest ("recommended, plan 1, plain, 2 threads").
  size_t width = 24;
  for (const auto& c : v.configurations) {
    width = std::max(width, fmt::format("{}", fmt::join(c.labels, ", ")).size());
  }
  fmt::print("\n{:<{}} {:<58} {:<12} {:>12} {:>12} {:>7} {:>11}\n", "", width, "configuration",
             "balance", "predicted", "measured", "error", "rank p/m");
  const workflow::CheckedConfiguration* fastest = &v.configurations.front();
  for (const auto& c : v.configurations) {
    if (c.measured_rank == 1) fastest = &c;
    fmt::print("{:<{}} {:<58} {:<12} {:>9.1f} ms {:>9.1f} ms {:>+6.1f}% {:>5} / {}\n",
               fmt::format("{}", fmt::join(c.labels, ", ")), width, balance::describe(c.config),
               fmt::format("[{}]", fmt::join(c.config.plan.balance, ",")), c.config.step_ms,
               c.measured_step_ms,
               100 * reports::relative_error(c.config.step_ms, c.measured_step_ms),
               c.predicted_rank, c.measured_rank);
  }
  const workflow::CheckedConfiguration& pick = v.configurations.front();
  if (&pick == fastest) {
    fmt::print("\nthe plan's pick measured fastest of the {} configurations trained\n",
               v.configurations.size());
  } else {
    fmt::print("\nthe plan's pick measured {:.1f}% slower than the fastest trained ({}: {})\n",
               100 * (pick.measured_step_ms / fastest->measured_step_ms - 1),
               fmt::join(fastest->labels, ", "), balance::describe(fastest->config));
  }
  // Round by round, against the configuration the pick lost most to: steps of the same round
  // met the same machine, which the medians, taken from different rounds, need not have.
  const workflow::CheckedConfiguration* lost_to = nullptr;
  double behind = 1;
  for (const auto& c : v.configurations) {
    if (&c == &pick) continue;
    const double ratio =
        reports::median_ratio_by_round(pick.measured_steps_ms, c.measured_steps_ms);
    if (ratio > behind) {
      behind = ratio;
      lost_to = &c;
    }
  }
  if (lost_to) {
    fmt::print(
        "round by round (the median of the rounds' ratios) it ran {:.1f}% slower than {}: {}\n",
        100 * (behind - 1), fmt::join(lost_to->labels, ", "), balance::describe(lost_to->config));
  } else {
    fmt::print(
        "round by round (the median of the rounds' ratios) it ran slower than no other "
        "configuration\n");
  }
  if (pick.predicted_in_turns_ms > 0) {  // when profiled in turns
    fmt::print(
        "predicted from the profile taken in turns with the runs: {:.1f} ms for the pick "
        "({:+.1f}%)\n",
        pick.predicted_in_turns_ms,
        100 * reports::relative_error(pick.predicted_in_turns_ms, pick.measured_step_ms));
  }
}

void run_auto_validate(const workflow::AutoValidateSettings& settings) {
  const workflow::AutoValidation result =
      workflow::validate_plan(settings, [](const std::string& line) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      });
  print_auto_table(result);
  // What this run wrote: the several-thread and in-turns profiles only when taken.
  std::vector<std::string> written;
  for (const std::string& file : workflow::plan_validation_files()) {
    if (file != "report.html" && std::filesystem::exists(settings.output + "/" + file)) {
      written.push_back(file);
    }
  }
  fmt::print("\nwrote {}\n", files_in(settings.output, written));
}

std::string describe_plan(const balance::Plan& plan) {
  std::string text = pipeline::to_string(plan.schedule);
  if (plan.virtual_stages > 1) text += fmt::format(" V={}", plan.virtual_stages);
  if (!plan.weight_delays.empty())
    text += fmt::format(" W[{}]", fmt::join(plan.weight_delays, ","));
  return text + fmt::format(", {} mb, ckpt {}", plan.chunks, pipeline::to_string(plan.checkpoint));
}

// The busiest device's bytes, in the unit that suits them; "-" when unmeasured.
std::string busiest(const std::vector<int64_t>& bytes) {
  return bytes.empty() ? "-" : format_bytes(*std::max_element(bytes.begin(), bytes.end()));
}

// --plans: each plan predicted and measured, ranked both ways.
void print_plans_table(const workflow::PlansComparison& comparison) {
  fmt::print("\n{:<24} {:<40} {:<14} {:>12} {:>12} {:>7} {:>9} {:>16}\n", "plan", "schedule",
             "balance", "predicted", "measured", "error", "rank p/m", "device peak p/m");
  const workflow::ComparedPlan* fastest = &comparison.plans.front();
  bool in_turns = false;
  for (const auto& c : comparison.plans) {
    if (c.measured_rank == 1) fastest = &c;
    in_turns = in_turns || c.predicted_in_turns_ms > 0;
    fmt::print(
        "{:<24} {:<40} {:<14} {:>9.1f} ms {:>9.1f} ms {:>+6.1f}% {:>4} / {:<2} {:>10} / {}\n",
        std::filesystem::path(c.file).filename().string(), describe_plan(c.plan),
        fmt::format("[{}]", fmt::join(c.plan.balance, ",")), c.plan.prediction.step_ms,
        c.measured_step_ms,
        100 * reports::relative_error(c.plan.prediction.step_ms, c.measured_step_ms),
        c.predicted_rank, c.measured_rank, busiest(c.plan.device_timed_memory_bytes()),
        busiest(c.measured_device_bytes));
  }
  fmt::print("\nmeasured fastest: {} ({:.1f} ms)\n", fastest->file, fastest->measured_step_ms);
  if (in_turns) {
    fmt::print("predicted from the profile taken in turns with the runs:\n");
    for (const auto& c : comparison.plans) {
      if (c.predicted_in_turns_ms <= 0) continue;
      fmt::print("  {:<24} {:>9.1f} ms ({:+.1f}%)\n",
                 std::filesystem::path(c.file).filename().string(), c.predicted_in_turns_ms,
                 100 * reports::relative_error(c.predicted_in_turns_ms, c.measured_step_ms));
    }
  }
}

void run_plans_comparison(const workflow::PlansComparisonSettings& settings) {
  const workflow::PlansComparison result =
      workflow::compare_plans(settings, [](const std::string& line) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      });
  print_plans_table(result);
  std::vector<std::string> written = {"plans-comparison.json"};
  if (settings.profile_in_turns) written.push_back("profile-in-turns.json");
  fmt::print("\nwrote {}\n", files_in(settings.output, written));
}

// Options that --plans takes from the plans, or that belong to the other modes.
const char* const kNotWithPlans[] = {"--auto",           "--model",       "--input-shape",
                                     "--input",          "--dtype",       "--virtual",
                                     "--weight-delays",  "--stages",      "--chunks",
                                     "--schedule",       "--checkpoint",  "--processes",
                                     "--devices",        "--top",         "--min-gain",
                                     "--schedules",      "--checkpoints", "--profile-rounds",
                                     "--profile-repeat", "--bind-cores"};

}  // namespace

void run_validate(const ValidateParams& params) {
  // Said with the first status line, once the settings passed their checks.
  std::string warning = oversubscription_warning(params.stages, params.threads_per_stage);
  const reports::ValidationRecord record =
      workflow::validate(params, [&warning](const std::string& line) {
        fmt::print(stderr, "{}", warning);
        warning.clear();
        fmt::print("{}\n", line);
        std::fflush(stdout);
      });
  print_table(record);
  // The prediction says pipelining loses: say so where the user cannot miss it.
  const reports::Candidate& dp = record.candidates.front();
  if (record.chunks > 1 && dp.predicted.speedup() < 1) {
    fmt::print(stderr,
               "{}{} is predicted slower with {} micro-batches than with 1 "
               "({:.1f} ms vs {:.1f} ms): `pipebal validate --auto` (or `pipebal plan`) searches "
               "for a faster configuration\n",
               warning_prefix(), fmt::format("[{}]", fmt::join(dp.balance, ",")), record.chunks,
               dp.predicted.step_ms, dp.predicted.naive_step_ms);
  }
  fmt::print("\nwrote {}\n", files_in(params.output, workflow::validation_files()));
}

void add_validate_command(CLI::App& app) {
  auto p = std::make_shared<ValidateParams>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Profile, balance (dp vs baselines), train each balance, compare prediction and measurement");
  add_model_option(*cmd, p->model)->capture_default_str();
  const auto input_shape = std::make_shared<std::string>();
  add_input_options(*cmd, *input_shape, p->inputs);
  add_dtype_option(*cmd, p->dtype);
  const auto virtual_given = std::make_shared<int>(0);
  add_virtual_stages_option(*cmd, *virtual_given);
  const auto weight_delays = std::make_shared<std::string>();
  add_weight_delays_option(*cmd, *weight_delays);
  cmd->add_option("--stages", p->stages, "pipeline stages")->capture_default_str();
  add_chunks_option(*cmd, p->chunks);
  add_schedule_option(*cmd, p->schedule);
  add_checkpoint_option(*cmd, p->checkpoint);
  cmd->add_option("--steps", p->steps, "measured training steps per run")->capture_default_str();
  cmd->add_option("--warmup-steps", p->warmup_steps,
                  "unmeasured steps per run; they also measure the peak memory")
      ->capture_default_str();
  cmd->add_option("--profile-repeat", p->profile_repeat, "timed repetitions per layer")
      ->capture_default_str();
  add_threads_option(*cmd, p->threads_per_stage);
  add_seed_option(*cmd, p->seed);
  add_step_timeout_option(*cmd, p->step_timeout_s);
  cmd->add_option("--processes", p->processes,
                  "train each candidate as this many processes, one per stage (0: as threads)")
      ->capture_default_str();
  auto automatic = std::make_shared<workflow::AutoValidateSettings>();
  cmd->add_flag("--auto",
                "let `pipebal plan` choose: profile at several micro-batch sizes, train the "
                "plan's best configurations, the plain model and yours (--stages ... if given)");
  cmd->add_option("--devices", automatic->devices, "--auto: devices (CPU stages) to plan for")
      ->capture_default_str();
  cmd->add_option("--profile-rounds", automatic->profile_rounds,
                  "--auto: profile in this many rounds spread over time, pooled (a few slow "
                  "seconds of a shared machine skew one round, not the profile); "
                  "--profile-repeat passes split among them (the default: at most that many)")
      ->capture_default_str();
  cmd->add_flag("--profile-in-turns", automatic->profile_in_turns,
                "--auto: also profile after each round of measured steps and predict every "
                "configuration again from that profile (how much the machine changed)");
  cmd->add_flag("--bind-cores", automatic->bind_cores,
                "--auto: pin each device's stage to --threads cores of its own, time the plain "
                "model on each, and plan with their speeds (the cores of a shared VM can differ "
                "for minutes on end); the plain model runs on the fastest");
  cmd->add_option("--top", automatic->top,
                  "--auto: the plan's best configurations trained (0: every one searched)")
      ->capture_default_str();
  auto min_gain_percent = std::make_shared<double>(100 * automatic->min_gain);
  cmd->add_option("--min-gain", *min_gain_percent,
                  "--auto: recommend pipelining (or more devices) only when predicted this many "
                  "percent faster than not pipelining (than one device; as pipebal plan "
                  "--min-gain)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  auto searched = std::make_shared<std::pair<std::vector<std::string>, std::vector<std::string>>>();
  cmd->add_option("--schedules", searched->first,
                  "--auto: schedules searched (default: gpipe,1f1b; interleaved and zb-h1 when "
                  "listed)")
      ->delimiter(',')
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  cmd->add_option("--checkpoints", searched->second,
                  "--auto: checkpoint modes searched (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"always", "except_last", "never"}));
  auto plans = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--plans", *plans,
                  "train these plan.json files of one model (e.g. from `pipebal balance` for "
                  "several schedules) side by side, step by step in turns, and set each one's "
                  "prediction beside its measurement; model and configuration come from the plans "
                  "(with --steps, --warmup-steps, --threads, --seed, --timeout, "
                  "--profile-in-turns)");
  cmd->add_option("-o,--output", p->output, "output directory")->required();
  cmd->footer(
      "Example (each into a directory of its own; a rerun may reuse its own):\n"
      "  pipebal validate --model resnet:depth=18,width=16 --input-shape 32,3,64,64 \\\n"
      "      --stages 2 --chunks 8 -o resnet/\n"
      "  pipebal validate --model gpt:layers=4,dim=64,heads=4,seq=32 --stages 2 --processes 2 "
      "-o gpt/\n"
      "  pipebal validate --model mlp:layers=8,width=256 --input-shape 64,256 --auto "
      "--devices 2 -o auto/\n"
      "  pipebal validate --model gpt:layers=4,dim=64,heads=4,seq=32 --auto --top 0 "
      "--profile-in-turns -o gpt-auto/\n"
      "  pipebal validate --plans gpipe.json 1f1b.json zb-h1.json --steps 10 "
      "--profile-in-turns -o plans/\n"
      "  pipebal report resnet/");
  cmd->callback([p, automatic, searched, cmd, virtual_given, weight_delays, min_gain_percent, plans,
                 input_shape] {
    check_not_a_rank("validate");
    if (!input_shape->empty()) p->input_shape = models::parse_shape(*input_shape);
    // Over the whole validation: its profile, and the runs it compares with the prediction.
    const MachineLoadMeter load;
    const auto warn_if_busy = [&load] { warn_if_machine_busy(load.load(), "validating"); };
    if (cmd->count("--plans") > 0) {
      for (const char* option : kNotWithPlans) {
        if (cmd->count(option) > 0) {
          throw std::invalid_argument(fmt::format(
              "--plans takes the model and its configuration from the plans: drop {}", option));
        }
      }
      workflow::PlansComparisonSettings settings;
      settings.plans = *plans;
      settings.steps = p->steps;
      settings.warmup_steps = p->warmup_steps;
      settings.threads_per_stage = cmd->count("--threads") > 0 ? p->threads_per_stage : 0;
      settings.profile_in_turns = automatic->profile_in_turns;
      settings.seed = p->seed;
      settings.step_timeout_s = p->step_timeout_s;
      settings.output = p->output;
      settings.warn = [](const std::string& line) {
        fmt::print(stderr, "{}{}\n", warning_prefix(), line);
      };
      run_plans_comparison(settings);
      warn_if_busy();
      return;
    }
    if (cmd->count("--auto") > 0) {
      if (p->processes > 0)
        throw std::invalid_argument("--auto trains as threads: drop --processes");
      if (*virtual_given > 0) throw std::invalid_argument("--virtual goes without --auto");
      if (!weight_delays->empty()) {
        throw std::invalid_argument("--weight-delays goes without --auto");
      }
      // Left at its default, the round count gives way to a smaller --profile-repeat; asked for,
      // it is not cut short unsaid.
      if (cmd->count("--profile-rounds") > 0 && p->profile_repeat >= 1 &&
          automatic->profile_rounds > p->profile_repeat) {
        throw std::invalid_argument(fmt::format(
            "--profile-rounds must be at most --profile-repeat ({}): each round times a pass at "
            "least, got {}",
            p->profile_repeat, automatic->profile_rounds));
      }
      workflow::AutoValidateSettings settings = *automatic;
      settings.min_gain = *min_gain_percent / 100;
      for (const std::string& name : searched->first) {
        settings.schedules.push_back(pipeline::parse_schedule_kind(name));
      }
      for (const std::string& name : searched->second) {
        settings.checkpoints.push_back(pipeline::parse_checkpoint_mode(name));
      }
      settings.model = p->model;
      settings.input_shape = p->input_shape;
      settings.inputs = p->inputs;
      settings.dtype = p->dtype;
      settings.steps = p->steps;
      settings.warmup_steps = p->warmup_steps;
      settings.profile_repeat = p->profile_repeat;
      settings.threads_per_stage = p->threads_per_stage;
      settings.seed = p->seed;
      settings.step_timeout_s = p->step_timeout_s;
      settings.output = p->output;
      const bool yours = cmd->count("--stages") + cmd->count("--chunks") +
                             cmd->count("--schedule") + cmd->count("--checkpoint") >
                         0;
      if (yours) settings.user = {p->stages, p->chunks, p->schedule, p->checkpoint};
      run_auto_validate(settings);
      warn_if_busy();
      return;
    }
    if (cmd->count("--devices") + cmd->count("--top") + cmd->count("--schedules") +
            cmd->count("--checkpoints") + cmd->count("--profile-rounds") +
            cmd->count("--profile-in-turns") + cmd->count("--min-gain") +
            cmd->count("--bind-cores") >
        0) {
      throw std::invalid_argument(
          "--devices, --top, --min-gain, --schedules, --checkpoints, --profile-rounds, "
          "--bind-cores and --profile-in-turns go with --auto (--profile-in-turns also with "
          "--plans)");
    }
    ValidateParams params = *p;
    params.virtual_stages = stages_per_device(params.schedule, *virtual_given);
    if (!weight_delays->empty()) params.weight_delays = parse_weight_delays(*weight_delays);
    if (params.schedule == pipeline::ScheduleKind::kZeroBubbleH1 &&
        params.weight_delays.size() == static_cast<size_t>(params.stages)) {  // else refused
      fmt::print(
          stderr, "{}",
          long_weight_delays_warning("--weight-delays", params.weight_delays, params.chunks));
    }
    // Candidates trained as processes run this very binary's `train`.
    if (params.processes > 0) params.executable = std::filesystem::read_symlink("/proc/self/exe");
    run_validate(params);
    warn_if_busy();
  });
}

}  // namespace pipebal::tools
