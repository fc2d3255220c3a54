// See validate_command.h.
#include "tools/validate_command.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/validation_record.h"
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

}  // namespace

void run_validate(const ValidateParams& params) {
  const reports::ValidationRecord record = workflow::validate(params, [](const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  });
  print_table(record);
  fmt::print(
      "\nwrote {0}/profile.json, plan.json, run.json, trace.json, validation.json, report.html\n",
      params.output);
}

void add_validate_command(CLI::App& app) {
  auto p = std::make_shared<ValidateParams>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Profile, balance (dp vs baselines), train each balance, compare prediction and measurement");
  add_model_option(*cmd, p->model)->capture_default_str();
  add_input_shape_option(*cmd, p->input_shape);
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
  add_threads_option(*cmd, p->threads);
  add_seed_option(*cmd, p->seed);
  add_step_timeout_option(*cmd, p->step_timeout_s);
  cmd->add_option("--processes", p->processes,
                  "train each candidate as this many processes, one per stage (0: as threads)")
      ->capture_default_str();
  cmd->add_option("-o,--output", p->output, "output directory")->required();
  cmd->footer(
      "Example:\n"
      "  pipebal validate --model resnet:depth=18,width=16 --input-shape 32,3,64,64 \\\n"
      "      --stages 2 --chunks 8 -o out/\n"
      "  pipebal validate --model gpt:layers=4,dim=64,heads=4,seq=32 --stages 2 --processes 2 "
      "-o out/\n"
      "  pipebal report out/");
  cmd->callback([p] {
    ValidateParams params = *p;
    // Candidates trained as processes run this very binary's `train`.
    if (params.processes > 0) params.executable = std::filesystem::read_symlink("/proc/self/exe");
    run_validate(params);
  });
}

}  // namespace pipebal::tools
