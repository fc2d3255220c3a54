// See common_options.h.
#include "tools/common_options.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/cores.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/parse_integers.h"
#include "tools/command_line.h"

namespace pipebal::tools {
namespace {

// Reads a name with pipebal's own parser (so a bad one gets the library's message) and hands
// CLI11 the enum's number, which it stores into the typed option.
template <typename Enum>
CLI::Validator named(Enum (*parse)(const std::string&), const std::string& what) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          value = std::to_string(static_cast<int>(parse(value)));
        } catch (const std::exception& error) {
          return error.what();
        }
        return "";
      },
      what);
}

}  // namespace

CLI::Validator given_at_least(int least) {
  return CLI::Validator(
      [least](std::string& value) -> std::string {
        const auto number = parse_integer_list(value);
        if (!number || number->size() != 1) return "expected a whole number, got " + value;
        if (number->front() < least)
          return fmt::format("must be at least {}, got {}", least, value);
        return "";
      },
      "");
}

CLI::Option* add_model_option(CLI::App& cmd, std::string& spec) {
  return cmd.add_option("--model", spec, "model SPEC (see `pipebal models`) or TorchScript file");
}

CLI::Option* add_input_shape_option(CLI::App& cmd, std::string& shape) {
  return cmd.add_option("--input-shape", shape,
                        "input shape, batch first, e.g. 32,3,64,64 (default: the model's)");
}

void add_input_options(CLI::App& cmd, std::string& shape, std::vector<std::string>& inputs) {
  CLI::Option* short_form = add_input_shape_option(cmd, shape);
  cmd.add_option("--input", inputs,
                 "one per forward argument: DTYPE[SHAPE], batch first, and for integers the "
                 "range, e.g. 'float32[32,3,64,64]', 'int64[32,64]:1000' (tokens in [0, 1000)); "
                 "dtypes float32, float64, float16, bfloat16, int64, int32, bool")
      ->excludes(short_form);
}

CLI::Option* add_dtype_option(CLI::App& cmd, std::string& dtype) {
  // Torch-free (the balancer's commands share these options): the names pipeline/dtype.h reads.
  static const std::map<std::string, std::string> floating_names = {
      {"float32", "float32"}, {"float", "float32"}, {"float64", "float64"},  {"double", "float64"},
      {"float16", "float16"}, {"half", "float16"},  {"bfloat16", "bfloat16"}};
  const CLI::Validator floating(
      [](std::string& name) -> std::string {
        const auto found = floating_names.find(name);
        if (found == floating_names.end()) {
          return "dtype '" + name + "': expected float32, float64, float16 or bfloat16";
        }
        name = found->second;
        return "";
      },
      "DTYPE");
  return cmd
      .add_option("--dtype", dtype,
                  "convert the model's parameters and floating-point inputs to float32, float64, "
                  "float16 or bfloat16 (default: as the model is)")
      ->transform(floating);
}

CLI::Option* add_virtual_stages_option(CLI::App& cmd, int& virtual_stages) {
  return cmd
      .add_option("--virtual", virtual_stages,
                  "stages per device with --schedule interleaved (default 2): the model is "
                  "cut into that many times more stages, device d holding d, d + devices, ...")
      ->check(given_at_least(1));
}

CLI::Option* add_weight_delays_option(CLI::App& cmd, std::string& delays) {
  return cmd.add_option(
      "--weight-delays", delays,
      "with --schedule zb-h1: per stage, how many micro-batches later than its B each W runs, "
      "e.g. 0,1, or -1 for the whole backward in B (default: a plan's, the fastest simulated "
      "within 1F1B's peak memory or the caps; else H1's 0,1,2,...)");
}

std::vector<int> parse_weight_delays(const std::string& text) {
  const auto delays = parse_integer_list(text);
  if (!delays) {
    throw std::invalid_argument(fmt::format(
        "W delays '{}': expected a count of micro-batches per stage separated by commas, e.g. "
        "0,1 (-1: that stage's backward whole)",
        text));
  }
  for (const int64_t d : *delays) {
    if (d < pipeline::kWholeBackward || d > pipeline::kMaxChunks) {
      throw std::invalid_argument(fmt::format("W delays '{}': {} is not from {} to {}", text, d,
                                              pipeline::kWholeBackward, pipeline::kMaxChunks));
    }
  }
  return {delays->begin(), delays->end()};
}

std::string long_weight_delays_warning(const std::string& source, const std::vector<int>& delays,
                                       int chunks) {
  std::vector<int> effective = delays;
  for (int& delay : effective) delay = std::min(delay, chunks);
  if (effective == delays) return "";
  return fmt::format(
      "{}{} {} with {} micro-batch{} run as {}: a W delay of the micro-batch count or more runs "
      "each W after the stage's last B\n",
      warning_prefix(), source, fmt::join(delays, ","), chunks, chunks == 1 ? "" : "es",
      fmt::join(effective, ","));
}

std::string oversubscription_warning(int devices, int threads) {
  const int cores = usable_cores();
  // One thread per stage only time-shares; intra-op pools past the cores also make OpenMP's idle
  // threads sleep between parallel regions.
  if (threads < 2 || int64_t{devices} * threads <= cores) return "";
  return fmt::format(
      "{}{} stages x {} intra-op threads need {} cores, more than {}: "
      "they share cores and run slower than their profile predicts (use fewer --threads)\n",
      warning_prefix(), devices, threads, int64_t{devices} * threads, usable_cores_text());
}

std::string shared_quota_warning(int processes, int threads, const std::optional<CpuQuota>& quota) {
  if (threads < 2 || !quota) return "";
  const int64_t needed = int64_t{processes} * threads;
  const int cores = cores_within_quota(std::numeric_limits<int>::max(), quota->cores);
  if (needed <= cores) return "";
  return fmt::format(
      "{}{} processes x {} intra-op threads need {} cores, more than the {} core{} that the CPU "
      "quota of {:.2f} cores they share lets them run on: they wait on the quota and run slower "
      "than their profile predicts (use fewer --threads)\n",
      warning_prefix(), processes, threads, needed, cores, cores == 1 ? "" : "s", quota->cores);
}

void warn_if_machine_busy(const std::optional<MachineLoad>& load, const std::string& what) {
  if (load && load->busy()) {
    std::cerr << warning_prefix()
              << fmt::format(
                     "the machine was busy while {}: {}; the times measured include that "
                     "competition (the hand-off between stages most), so predictions "
                     "from them fit a busy machine, not an idle one\n",
                     what, describe_load(*load))
              << std::flush;
  }
  if (load && load->held_back()) {
    std::cerr << warning_prefix()
              << fmt::format(
                     "{} while {}: the times measured include its waits; give pipebal fewer "
                     "threads or a larger quota\n",
                     describe_throttling(*load), what)
              << std::flush;
  }
}

void warn_if_profiled_busy(const std::optional<MachineLoad>& load, const std::string& path,
                           std::ostream& warnings) {
  if (load && load->busy()) {
    warnings << warning_prefix()
             << fmt::format(
                    "{} was measured while the machine was busy ({}): its times, and a "
                    "plan from them, fit that machine; profile again on an idle one\n",
                    printable(path), describe_load(*load))
             << std::flush;
  }
  if (load && load->held_back()) {
    warnings << warning_prefix()
             << fmt::format(
                    "{} was measured while {}: its times, and a plan from them, fit that quota\n",
                    printable(path), describe_throttling(*load))
             << std::flush;
  }
}

int stages_per_device(pipeline::ScheduleKind schedule, int given) {
  if (schedule != pipeline::ScheduleKind::kInterleaved) {
    if (given > 1) {
      throw std::invalid_argument("--virtual " + std::to_string(given) +
                                  " goes with --schedule interleaved");
    }
    return 1;
  }
  if (given == 0) return 2;
  if (given < 1 || given > 64) {
    throw std::invalid_argument("--virtual must be between 1 and 64, got " + std::to_string(given));
  }
  return given;
}

CLI::Option* add_chunks_option(CLI::App& cmd, int& chunks) {
  return cmd.add_option("--chunks", chunks, "micro-batches per mini-batch")->capture_default_str();
}

CLI::Option* add_schedule_option(CLI::App& cmd, pipeline::ScheduleKind& schedule) {
  return cmd
      .add_option("--schedule", schedule, "gpipe, 1f1b, interleaved (see --virtual) or zb-h1")
      ->transform(named(&pipeline::parse_schedule_kind, ""))
      ->type_name("NAME")
      ->default_str(pipeline::to_string(schedule));
}

CLI::Option* add_checkpoint_option(CLI::App& cmd, pipeline::CheckpointMode& checkpoint) {
  return cmd.add_option("--checkpoint", checkpoint, "always, except_last or never")
      ->transform(named(&pipeline::parse_checkpoint_mode, ""))
      ->type_name("NAME")
      ->default_str(pipeline::to_string(checkpoint));
}

CLI::Option* add_threads_option(CLI::App& cmd, int& threads) {
  return cmd.add_option("--threads", threads, "intra-op threads per stage")->capture_default_str();
}

CLI::Option* add_seed_option(CLI::App& cmd, uint64_t& seed) {
  return cmd.add_option("--seed", seed, "seed for weights, data and dropout")
      ->capture_default_str();
}

CLI::Option* add_step_timeout_option(CLI::App& cmd, double& seconds) {
  return cmd
      .add_option("--timeout", seconds,
                  "seconds a training step may take before the run fails, naming the "
                  "stage and action still running (0: no limit); across processes also how "
                  "long the rendezvous and each wait for another rank may take (0: 300 s)")
      ->capture_default_str();
}

}  // namespace pipebal::tools
