// The `cupti` timer backend (PIPEBAL_WITH_CUPTI builds only): the GPU time of a region is the
// sum of the durations of the kernels it launched, read from CUPTI activity records, so launch
// gaps and host overhead do not count.
#pragma once

#ifdef PIPEBAL_WITH_CUPTI

#include <memory>

#include "pipebal/profiler/timer.h"

namespace pipebal::profiler {

// Throws std::runtime_error when CUPTI cannot be set up (another tool holds it, say).
std::unique_ptr<LayerTimer> make_cupti_timer(const c10::Device& device);

}  // namespace pipebal::profiler

#endif  // PIPEBAL_WITH_CUPTI
