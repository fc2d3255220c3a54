// The one checking wrapper for CUPTI calls (PIPEBAL_WITH_CUPTI builds only). Setup fails
// loudly (kThrow: std::runtime_error); profiling paths warn and carry on (kWarn), because the
// profiler must never kill the run it measures.
#pragma once

#ifdef PIPEBAL_WITH_CUPTI

#include <cupti.h>

namespace pipebal::profiler {

enum class CuptiFailure { kThrow, kWarn };

// Returns true when `result` is CUPTI_SUCCESS. Otherwise reports the call's text, CUPTI's
// error string and code, and the place: throws for kThrow, warns and returns false for kWarn.
bool cupti_check(CUptiResult result, const char* call, const char* file, int line,
                 CuptiFailure on_failure);

}  // namespace pipebal::profiler

// PIPEBAL_CUPTI(cuptiActivityFlushAll(0), kWarn)
#define PIPEBAL_CUPTI(call, on_failure)                               \
  ::pipebal::profiler::cupti_check((call), #call, __FILE__, __LINE__, \
                                   ::pipebal::profiler::CuptiFailure::on_failure)

#endif  // PIPEBAL_WITH_CUPTI
