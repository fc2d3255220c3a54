// See profile_command.h.
#include "tools/profile_command.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/common/cores.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profile_merge.h"
#include "pipebal/profiler/profile_table.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/workflow/profiling.h"
#include "pipebal/workflow/watchdog.h"
#include "tools/command_line.h"
#include "tools/common_options.h"
#include "tools/progress.h"

namespace pipebal::tools {
namespace {

constexpr const char* kFooter =
    "Example:\n"
    "  pipebal profile --model resnet:depth=18 --input-shape 32,3,64,64 --chunks 4 -o "
    "profile.json\n"
    "  pipebal profile --model mlp:layers=4,width=256 --repeat 20 --threads 1 -o profile.json\n"
    "  pipebal profile --model gpt:layers=4 --chunks 8 --threads 1 --co-runners 1 -o "
    "profile.json   # 2 CPU stages\n"
    "  pipebal profile --model lm.pt --input 'int64[32,128]:50000' -o profile.json   # token ids\n"
    "  pipebal profile --model gpt:layers=4 --chunks 1,2,4,8 -o profile.json   # for `pipebal "
    "plan`\n"
    "  pipebal profile --model gpt:layers=4 --chunks 1,2,4,8 --repeat 12 --rounds 3 -o "
    "profile.json   # a shared machine\n"
    "Times are medians after warm-up; the profile is measured at the micro-batch size\n"
    "ceil(batch / chunks), which is what `pipebal balance --chunks` expects. Several counts\n"
    "measure several sizes (the first is the profile's own); balance interpolates between them.\n"
    "On a CPU the profile also records what pipebal's engine adds per step, per action and\n"
    "per message between stages (`engine`), which balance, plan and validate charge.\n"
    "For stages that share a CPU, --co-runners (stages - 1) times each layer with the other\n"
    "cores as busy as the other stages will keep them.";

profiler::ProfileOptions profile_options(const ProfileParams& params) {
  profiler::ProfileOptions options;
  options.backend = profiler::parse_timer_backend(params.backend);
  options.warmup = params.warmup;
  options.repeat = params.repeat;
  options.time_budget_s = params.time_budget_s;
  options.co_runners = params.co_runners;
  options.device = profiler::parse_device(params.device);
  if (!params.dtype.empty()) options.dtype = profiler::parse_dtype(params.dtype);
  return options;
}

// Per measured size: the whole model's time per micro-batch and per sample, which shows how
// much efficiency small micro-batches lose.
void print_size_summary(const profiler::Profile& profile, std::ostream& out) {
  if (profile.sizes.empty()) return;
  out << fmt::format("\n{:>8} {:>8} {:>14} {:>14}\n", "chunks", "size", "fwd+bwd/mb", "per sample");
  for (const profiler::Profile::Size& size : profile.sizes) {
    double ms = 0;
    for (const profiler::LayerProfile& layer : size.layers) {
      ms += layer.forward_ms + layer.backward_ms;
    }
    out << fmt::format("{:>8} {:>8} {:>11.3f} ms {:>11.4f} ms\n", size.chunks,
                       size.micro_batch_size, ms, ms / double(size.micro_batch_size));
  }
  if (!profile.skipped_sizes.empty()) {
    out << fmt::format(
        "not measured: size{} {} (the cost per sample is linear around them: interpolated; "
        "--skip-linear 0 measures every size)\n",
        profile.skipped_sizes.size() > 1 ? "s" : "", fmt::join(profile.skipped_sizes, ", "));
  }
}

}  // namespace

void run_profile(const ProfileParams& params, std::ostream& out, std::ostream* progress,
                 Progress::Mode progress_mode) {
  const int cores = usable_cores();
  if (params.threads < 0 || params.threads > cores) {
    throw std::invalid_argument(
        fmt::format("--threads must be between 0 (LibTorch's default) and {}, got {}",
                    usable_cores_text(), params.threads));
  }
  if (params.rounds < 1) {
    throw std::invalid_argument(fmt::format("--rounds must be at least 1, got {}", params.rounds));
  }
  if (params.repeat >= 1 && params.rounds > params.repeat) {  // a bad --repeat is said below
    throw std::invalid_argument(fmt::format(
        "--rounds must be at most --repeat ({}): each round times a pass at least, got {}",
        params.repeat, params.rounds));
  }
  check_time_limit(params.timeout_s, "--timeout", "no limit");
  // Parse every option before the (slow) model build, so that typos fail at once.
  const profiler::ProfileOptions options = profile_options(params);
  check_outputs_apart({{"--model", params.model}}, {{"-o", params.output_path}});
  if (!params.output_path.empty()) check_writable(params.output_path);
  if (params.threads > 0) at::set_num_threads(params.threads);
  // A layer that never returns cannot be interrupted: the watchdog ends the command.
  workflow::Watchdog watchdog(params.timeout_s, "building the model");

  models::Model model = models::build_model(params.model, params.seed);
  watchdog.beat("checking the model on its sample");
  const std::vector<models::InputSpec> inputs =
      models::model_inputs(model, params.inputs,
                           params.input_shape.empty() ? std::vector<int64_t>{}
                                                      : models::parse_shape(params.input_shape));
  const std::vector<int64_t>& shape = inputs.front().shape;
  const std::vector<int64_t> sizes = workflow::micro_batch_sizes(params.chunks, shape[0]);
  if (sizes.size() > 1 || params.chunks.front() > 1) {
    out << fmt::format("profiling at micro-batch size{} {} (batch {} / {} chunks, rounded up)\n",
                       sizes.size() > 1 ? "s" : "", fmt::join(sizes, ", "), shape[0],
                       fmt::join(params.chunks, ", "));
  }

  Progress line(progress != nullptr ? *progress : std::cerr,
                progress != nullptr ? progress_mode : Progress::Mode::kQuiet);
  const bool several = sizes.size() > 1;
  // Progress lines, prefixed with the round when there are several.
  const auto reporter = [&line, &watchdog,
                         several](const std::string& round) -> workflow::SizedProgressFn {
    return [&line, &watchdog, several, round](int64_t size, const profiler::ProfileProgress& p) {
      using Phase = profiler::ProfileProgress::Phase;
      const char* phase = p.phase == Phase::kLayers         ? "memory and warm-up, layer"
                          : p.phase == Phase::kWarmupPasses ? "warm-up pass"
                                                            : "timed pass";
      const std::string what =
          round + (several ? fmt::format("size {}: {}", size, phase) : std::string(phase));
      line.update(what, p.done, p.total, p.layer);
      watchdog.beat(fmt::format("profiling ({} {} of {}{})", what, p.done, p.total,
                                p.layer.empty() ? "" : ", after '" + p.layer + "'"));
    };
  };
  profiler::Profile profile;
  if (params.rounds == 1) {
    profile = workflow::profile_at_sizes(model, inputs, params.chunks, params.seed, options, {},
                                         reporter(""), params.skip_linear_percent / 100);
  } else {
    // The first round chooses the sizes (leaving out those where the cost is linear); the others
    // measure the same sizes, one warm-up pass each, caches and allocator pools being warm.
    profiler::ProfileOptions round_options = options;
    round_options.repeat = (options.repeat + params.rounds - 1) / params.rounds;
    round_options.time_budget_s = options.time_budget_s / params.rounds;
    std::vector<profiler::Profile> rounds;
    std::vector<int> measured = params.chunks;
    for (int round = 1; round <= params.rounds; ++round) {
      rounds.push_back(workflow::profile_at_sizes(
          model, inputs, measured, params.seed, round_options, {},
          reporter(fmt::format("round {} of {}, ", round, params.rounds)),
          round == 1 ? params.skip_linear_percent / 100 : 0));
      if (round == 1) {
        measured = {params.chunks.front()};  // the profile's own size first, as given
        for (const profiler::Profile::Size& size : rounds.front().sizes) {
          if (size.chunks != params.chunks.front()) measured.push_back(size.chunks);
        }
        round_options.warmup = std::min(round_options.warmup, 1);
      }
    }
    profile = profiler::merge_profiles(rounds);
  }
  profile.inputs = params.inputs.empty() ? std::vector<std::string>{} : models::to_strings(inputs);
  line.finish();
  warn_if_machine_busy(profile.environment.machine_load, "profiling");
  if (!params.output_path.empty()) profiler::write_profile(params.output_path, profile);
  profiler::print_profile_table(profile, out);
  print_size_summary(profile, out);
  if (!params.output_path.empty()) out << "\nwrote " << printable(params.output_path) << "\n";
}

void add_profile_command(CLI::App& app) {
  auto params = std::make_shared<ProfileParams>();
  CLI::App* sub = app.add_subcommand(
      "profile",
      "Measure every layer's forward and backward time and memory on a sample batch.\n"
      "Writes the cost profile that `pipebal balance` partitions.");
  sub->footer(kFooter);
  add_model_option(*sub, params->model)->required();
  add_input_options(*sub, params->input_shape, params->inputs);
  add_dtype_option(*sub, params->dtype);
  sub->add_option("--device", params->device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--backend", params->backend, "Timer: auto, wallclock, events or cupti")
      ->capture_default_str();
  sub->add_option("--warmup", params->warmup, "Untimed repetitions per layer")
      ->capture_default_str();
  sub->add_option("--repeat", params->repeat, "Timed repetitions per layer")->capture_default_str();
  sub->add_option("--time-budget", params->time_budget_s,
                  "Seconds of timed passes over the model (0: none)")
      ->capture_default_str();
  sub->add_option("--chunks,-m", params->chunks,
                  "Micro-batches per step: profile at ceil(batch / chunks) samples; several "
                  "(e.g. 1,2,4,8) profile each size for `balance` and `plan` to choose from")
      ->delimiter(',')
      ->capture_default_str();
  auto* skip_linear =
      sub->add_option(
             "--skip-linear", params->skip_linear_percent,
             "With several --chunks: sizes between two whose cost per sample agrees within "
             "this many percent are interpolated, not measured (0: measure every size)")
          ->check(CLI::Range(0.0, 1000.0))
          ->capture_default_str();
  sub->add_option("--co-runners", params->co_runners,
                  "Threads training the model alongside, as the other stages will (CPU; "
                  "typically stages - 1)")
      ->capture_default_str();
  sub->add_option("--rounds", params->rounds,
                  "Profile in this many rounds, one after the other, pooled: --repeat's passes "
                  "split among them, so that a slow spell of a shared machine skews one round of "
                  "every size, not every pass of one")
      ->capture_default_str();
  sub->add_option("--threads", params->threads, "Intra-op threads (0: LibTorch's default)")
      ->capture_default_str();
  add_seed_option(*sub, params->seed);
  sub->add_option("--timeout", params->timeout_s,
                  "Seconds profiling may go without progress (a layer that never returns) before "
                  "it fails, naming where it was (0: no limit)")
      ->capture_default_str();
  sub->add_option("-o,--output", params->output_path, "Write the profile here (pipebal.profile/1)");
  sub->add_flag("-q,--quiet", params->quiet, "No progress on stderr");
  sub->callback([params, skip_linear]() {
    check_not_a_rank("profile");
    // Given with one size it would do nothing: refused, not ignored.
    if (skip_linear->count() > 0 && params->chunks.size() < 2) {
      throw std::invalid_argument(
          "--skip-linear goes with several --chunks (e.g. --chunks 1,2,4,8): with one size "
          "there is nothing to interpolate");
    }
    run_profile(*params, std::cout, &std::cerr, Progress::mode_for_stderr(params->quiet));
  });
}

}  // namespace pipebal::tools
