// `pipebal validate`: profile → balance → train with the same engine → compare the predicted
// speed-up with the measured one, for dp and the baseline partitioners.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "models/zoo.h"
#include "pipeline/schedule.h"

namespace pipebal::tools {

struct ValidateParams {
  std::string model = models::default_model_spec();
  std::string input_shape;  // empty: the model's default
  int stages = 2;
  int chunks = pipeline::kDefaultChunks;
  std::string schedule = "gpipe";
  std::string checkpoint = "except_last";
  int steps = 5;
  int warmup_steps = 2;  // the second step is the first at steady-state memory
  int profile_repeat = 10;
  int threads = 1;
  uint64_t seed = 0;
  double step_timeout_s = 0;  // per training step; 0: no limit
  std::string output;         // the directory
};

void add_validate_command(CLI::App& app);

// Runs the whole loop and writes DIR/{profile,plan,run,trace,validation}.json and report.html.
void run_validate(const ValidateParams& params);

}  // namespace pipebal::tools
