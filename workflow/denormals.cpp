// See denormals.h.
#include "pipebal/workflow/denormals.h"

#include "pipebal/common/env_flag.h"

#include <ATen/Context.h>

#include "pipebal/profiler/environment.h"

namespace pipebal::workflow {

bool flush_denormals_unless_kept() {
  if (!env_flag(kKeepDenormalsVariable)) {
    at::globalContext().setFlushDenormal(true);  // false where the CPU has no such mode
  }
  return profiler::denormals_flushed();
}

}  // namespace pipebal::workflow
