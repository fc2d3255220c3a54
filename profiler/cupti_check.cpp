// See cupti_check.h.
#include "pipebal/profiler/cupti_check.h"

#include <stdexcept>
#include <string>

#include <c10/util/Exception.h>

namespace pipebal::profiler {

bool cupti_check(CUptiResult result, const char* call, const char* file, int line,
                 CuptiFailure on_failure) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown";
  const std::string message = std::string("CUPTI call ") + call + " failed: " + text + " (" +
                              std::to_string(static_cast<int>(result)) + ") at " + file + ":" +
                              std::to_string(line);
  if (on_failure == CuptiFailure::kThrow) throw std::runtime_error(message);
  TORCH_WARN(message);
  return false;
}

}  // namespace pipebal::profiler
