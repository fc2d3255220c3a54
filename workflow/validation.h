// Validation as a library: profile a model at the micro-batch size, balance it with dp and the
// baseline partitioners, train every distinct balance with the same engine pipelined and with
// one micro-batch, and set the predicted step time and speed-up beside the measured ones.
// What `pipebal validate` and `pipebal demo` run.
//
//   workflow::ValidateSettings settings;
//   settings.model = "gpt:layers=6,dim=128,heads=4,seq=64";
//   settings.stages = 2;
//   settings.output = "out";
//   const reports::ValidationRecord record = workflow::validate(settings);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/reports/validation_record.h"

namespace pipebal::workflow {

struct ValidateSettings {
  std::string model = models::default_model_spec();
  std::vector<int64_t> input_shape;  // batch first; empty: the model's default
  std::vector<std::string> inputs;   // --input specs instead, one per forward argument
  std::string dtype;                 // the model and its floating inputs converted; empty: as is
  int stages = 2;
  int chunks = pipeline::kDefaultChunks;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  // Stages per device with the interleaved schedule: the model is cut into stages x this.
  int virtual_stages = 1;
  // zb-h1: each stage's W delay; empty: chosen for each balance (balance/weight_delays.h).
  std::vector<int> weight_delays;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;
  int steps = 5;
  int warmup_steps = 2;  // the second step is the first at steady-state memory
  int profile_repeat = 10;
  int threads_per_stage = 1;
  uint64_t seed = 0;
  // Per training step (pipeline::StepTimeout, thrown), and without progress while profiling: a
  // layer stuck there cannot be interrupted, so the watchdog (watchdog.h) ends the whole process
  // with one line on stderr and status 2. 0: no limit.
  double step_timeout_s = 0;
  // Train each candidate as this many processes, one per stage (0: as threads of this process),
  // by launching `executable train` (the pipebal binary) like `pipebal launch`. The pipelined
  // and the one-micro-batch runs then follow each other instead of alternating step by step.
  int processes = 0;
  std::string executable;
  std::string output;  // the directory
};

// The names of the files validate() writes into the output directory.
const std::vector<std::string>& validation_files();

// Called with one line saying what validate() starts next.
using StatusFn = std::function<void(const std::string& line)>;

// Runs the whole loop and puts DIR/{profile,profile-batch,plan,run,trace,validation}.json and
// report.html in place at once (StagedDirectory). Throws std::invalid_argument for bad
// settings before any work, and for a model or shape that does not fit.
reports::ValidationRecord validate(const ValidateSettings& settings, const StatusFn& status = {});

}  // namespace pipebal::workflow
