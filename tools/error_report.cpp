// See error_report.h.
#include "tools/error_report.h"

#include <stdexcept>

#include "pipeline/error_text.h"

namespace pipebal::tools {

ErrorReport report_error(const std::exception& error, const std::string& prefix) {
  // c10::Error and friends append a backtrace; users need only the cause, in one line.
  const std::string what = pipeline::error_summary(error);
  const bool bad_input = dynamic_cast<const std::invalid_argument*>(&error) != nullptr;
  if (!bad_input && dynamic_cast<const std::logic_error*>(&error) != nullptr) {
    return {"pipebal: internal error (a bug in pipebal; please report it with the command line): " +
                prefix + what,
            kInternalErrorStatus};
  }
  return {"pipebal: error: " + prefix + what, kUserErrorStatus};
}

}  // namespace pipebal::tools
