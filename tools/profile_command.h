// `pipebal profile`: builds a model, makes a synthetic sample at the micro-batch size, profiles
// every layer (forward and backward time, memory), prints the layer table and writes
// profile.json for `pipebal balance`.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipebal/pipeline/schedule.h"
#include "tools/progress.h"

namespace pipebal::tools {

// Everything `pipebal profile` takes; the member defaults are the defaults --help shows.
struct ProfileParams {
  std::string model;                // required: SPEC or TorchScript file
  std::string input_shape;          // empty: the model's default
  std::vector<std::string> inputs;  // --input specs, one per forward argument
  std::string dtype;                // empty: as loaded
  std::string device = "cpu";
  std::string backend = "auto";
  int warmup = 2;
  int repeat = 10;
  double time_budget_s = 0;  // 0: no budget
  int co_runners = 0;        // threads training the model alongside (profiler/co_runner.h)
  // Profile at ceil(batch / chunks) samples for each; the first is the profile's own (what
  // `balance` plans by default), the others let `balance` and `plan` pick among counts.
  std::vector<int> chunks = {pipeline::kDefaultChunks};
  // With several sizes: leave out those around which the cost per sample is already linear
  // within this many percent (workflow::profile_at_sizes); 0 measures every size.
  double skip_linear_percent = 3;
  // Profile in this many rounds, one after the other, pooled (profiler::merge_profiles):
  // --repeat's passes (and --time-budget) split among them, so a slow spell of a shared machine
  // skews one round of every size rather than all of one size's passes.
  int rounds = 1;
  int threads = 0;  // intra-op threads; 0: LibTorch's default
  uint64_t seed = 0;
  // Seconds without progress (a layer that never returns) before the command fails, naming
  // where it was (workflow::Watchdog); 0: no limit.
  double timeout_s = 0;
  std::string output_path;
  bool quiet = false;  // no progress
};

// Registers the `profile` subcommand; its callback throws std::exception on bad input, which
// main turns into one line and exit status 2.
void add_profile_command(CLI::App& app);

// Runs the command: the table on `out`, progress on `progress` (nullptr: none) as `mode` says.
void run_profile(const ProfileParams& params, std::ostream& out, std::ostream* progress,
                 Progress::Mode mode = Progress::Mode::kLines);

}  // namespace pipebal::tools
