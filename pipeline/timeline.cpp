// See timeline.h.
#include "pipebal/pipeline/timeline.h"

#include <algorithm>

namespace pipebal::pipeline {

std::vector<double> busy_ms_per_stage(const Timeline& timeline, int stages) {
  std::vector<double> busy(stages, 0.0);
  for (const auto& t : timeline) {
    if (t.stage >= 0 && t.stage < stages) busy[t.stage] += t.end_ms - t.start_ms;
  }
  return busy;
}

double span_ms(const Timeline& timeline) {
  if (timeline.empty()) return 0;
  double first = timeline.front().start_ms, last = timeline.front().end_ms;
  for (const auto& t : timeline) {
    first = std::min(first, t.start_ms);
    last = std::max(last, t.end_ms);
  }
  return last - first;
}

}  // namespace pipebal::pipeline
