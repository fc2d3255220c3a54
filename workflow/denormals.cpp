// See denormals.h.
#include "workflow/denormals.h"

#include <cstdlib>
#include <string>

#include <ATen/Context.h>

#include "profiler/environment.h"

namespace pipebal::workflow {

bool flush_denormals_unless_kept() {
  const char* keep = std::getenv(kKeepDenormalsVariable);
  if (keep == nullptr || std::string(keep).empty() || std::string(keep) == "0") {
    at::globalContext().setFlushDenormal(true);  // false where the CPU has no such mode
  }
  return profiler::denormals_flushed();
}

}  // namespace pipebal::workflow
