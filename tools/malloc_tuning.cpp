// See malloc_tuning.h.
#include "tools/malloc_tuning.h"

#include <malloc.h>

#include <climits>

namespace pipebal::tools {

void keep_freed_memory_in_process() {
  // Serve large blocks from the heap, not from fresh mmaps, and never trim the heap's top.
  mallopt(M_MMAP_THRESHOLD, INT_MAX);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // One arena for every thread: a stage worker's own arena grows in heaps of at most 64 MiB
  // and maps larger blocks afresh, which brought the page faults back on worker threads
  // (U-Net at batch 64, one stage: 1260 ms per step with per-thread arenas, 526 ms without).
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace pipebal::tools
