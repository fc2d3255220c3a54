// `pipebal plan`: how to run a profiled model on given devices. Searches stage count, micro-batch
// count, schedule, checkpoint mode (and data-parallel replicas) with balance::search_plans,
// prints the best configurations beside the plain model on one device, and writes the
// recommended one as plan.json for `pipebal train --plan`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/device_options.h"

namespace pipebal::tools {

// Everything `pipebal plan` takes; the member defaults are the defaults --help shows.
struct PlanParams {
  std::string profile_path;
  int devices = 0;  // required
  DeviceParams device;
  std::vector<int> chunks;               // empty: every count the profile's sizes allow
  std::vector<std::string> schedules;    // empty: all
  std::vector<std::string> checkpoints;  // empty: all
  bool data_parallel = false;
  std::vector<std::string> plain_profiles;  // the same model profiled with more threads
  double min_gain_percent = 5;              // balance::PlanSearch::min_gain, in percent
  int top = 10;
  std::string format = "table";  // table or json
  std::string output_path;
  bool quiet = false;  // no progress on stderr (shown only once the search has taken 2 s)
};

void add_plan_command(CLI::App& app);

// Runs the command with parsed parameters: the ranking (or JSON) on `out`.
void run_plan(const PlanParams& params, std::ostream& out);

}  // namespace pipebal::tools
