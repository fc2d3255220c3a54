// `pipebal balance`: reads a cost profile, partitions the layers into pipeline stages, prints
// the per-stage table and the predicted step time, and writes plan.json.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipebal/pipeline/schedule.h"
#include "tools/device_options.h"

namespace pipebal::tools {

// Everything `pipebal balance` takes; the member defaults are the defaults --help shows.
struct BalanceParams {
  std::string profile_path;
  int stages = 0;  // required
  int chunks = 0;  // 0: the profile's (balance::planned_chunks)
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  std::string weight_delays;  // --weight-delays; empty: chosen under the memory budget
  int virtual_stages = 0;     // --virtual; 0: the schedule's default (tools::stages_per_device)
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;
  DeviceParams devices;  // caps, speeds, bandwidths, parameter scale
  int replicas = 1;      // pipelines trained data-parallel
  std::string algorithm = "dp";
  std::string balance;  // --balance: this partition, costed and simulated, instead of one chosen
  std::string output_path;
  bool json = false;
  std::string format = "table";  // table, json, torchgpipe or pippy
  bool compare = false;
  // Where to write each schedule's dp plan of the comparison (gpipe.json, 1f1b.json,
  // interleaved-2.json, ...), for `pipebal validate --plans`; empty: none written.
  std::string schedule_plans_dir;
};

// Registers the `balance` subcommand; its callback throws std::exception on bad input, which
// main turns into one line and exit status 2.
void add_balance_command(CLI::App& app);

// Runs the command with parsed parameters, printing to `out` (the table, or the plan JSON) and
// warnings to `warnings` (a plan predicted to lose to its own one-micro-batch run).
void run_balance(const BalanceParams& params, std::ostream& out, std::ostream& warnings);

}  // namespace pipebal::tools
