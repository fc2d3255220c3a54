// What the engine measured: every action's start and end on every stage. Torch-free.
#pragma once

#include <vector>

#include "pipebal/pipeline/schedule.h"

namespace pipebal::pipeline {

struct TimedAction {
  int stage = 0;
  Action action;
  double start_ms = 0;  // since the start of the step
  double end_ms = 0;
};

using Timeline = std::vector<TimedAction>;

// Busy time of each of `stages` stages, and the span from the first start to the last end.
std::vector<double> busy_ms_per_stage(const Timeline& timeline, int stages);
double span_ms(const Timeline& timeline);

}  // namespace pipebal::pipeline
