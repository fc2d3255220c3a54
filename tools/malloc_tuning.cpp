// See malloc_tuning.h.
#include "tools/malloc_tuning.h"

#include <malloc.h>

#include <climits>

namespace pipebal::tools {

void keep_freed_memory_in_process() {
  // Serve large blocks from the heap, not from fresh mmaps, and never trim the heap's top.
  mallopt(M_MMAP_THRESHOLD, INT_MAX);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

}  // namespace pipebal::tools
