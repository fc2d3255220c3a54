// See error_text.h.
#include "pipebal/pipeline/error_text.h"

#include <c10/util/Exception.h>

namespace pipebal::pipeline {

std::string error_summary(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return summarize_error_text(c10_error->what_without_backtrace());
  }
  return summarize_error_text(error.what());
}

}  // namespace pipebal::pipeline
