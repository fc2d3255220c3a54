// See common_options.h.
#include "tools/common_options.h"

#include <functional>

#include "pipeline/schedule.h"

namespace pipebal::tools {
namespace {

// A CLI11 check that runs pipebal's own parser, so the message is the one the library gives.
CLI::Validator parsed_by(const std::function<void(const std::string&)>& parse,
                         const std::string& name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          parse(value);
        } catch (const std::exception& error) {
          return error.what();
        }
        return "";
      },
      name);
}

}  // namespace

CLI::Option* add_model_option(CLI::App& cmd, std::string& spec) {
  return cmd.add_option("--model", spec, "model SPEC (see `pipebal models`) or TorchScript file");
}

CLI::Option* add_input_shape_option(CLI::App& cmd, std::string& shape) {
  return cmd.add_option("--input-shape", shape,
                        "input shape, batch first, e.g. 32,3,64,64 (default: the model's)");
}

CLI::Option* add_chunks_option(CLI::App& cmd, int& chunks) {
  return cmd.add_option("--chunks", chunks, "micro-batches per mini-batch")->capture_default_str();
}

CLI::Option* add_schedule_option(CLI::App& cmd, std::string& schedule) {
  return cmd.add_option("--schedule", schedule, "gpipe or 1f1b")
      ->check(parsed_by([](const std::string& v) { pipeline::parse_schedule_kind(v); }, "SCHEDULE"))
      ->capture_default_str();
}

CLI::Option* add_checkpoint_option(CLI::App& cmd, std::string& checkpoint) {
  return cmd.add_option("--checkpoint", checkpoint, "always, except_last or never")
      ->check(
          parsed_by([](const std::string& v) { pipeline::parse_checkpoint_mode(v); }, "CHECKPOINT"))
      ->capture_default_str();
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
                  "stage and action still running (0: no limit)")
      ->capture_default_str();
}

}  // namespace pipebal::tools
