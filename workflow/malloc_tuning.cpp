// See malloc_tuning.h.
#include "pipebal/workflow/malloc_tuning.h"

#include <malloc.h>

#include <climits>

#ifdef PIPEBAL_WITH_JEMALLOC
// Read by jemalloc when the process starts. Never hand freed pages back to the kernel, so a
// step reuses the previous step's memory instead of faulting it in again (with the default
// decay a one-stage U-Net step took 6.4 s instead of 0.48 s). And reuse a freed block for
// any smaller request: jemalloc's default (at most 64x larger) made the profiler's repeated
// passes over AmoebaNet-D take fresh memory every pass, 6 MiB more each, faulted in anew,
// which made its layer times 1.7x slower and erratic.
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:20";
}
#endif

namespace pipebal::workflow {

void keep_freed_memory_in_process() {
#ifndef PIPEBAL_WITH_JEMALLOC
  // glibc: serve large blocks from the heap, not from fresh mmaps, and never trim the heap.
  mallopt(M_MMAP_THRESHOLD, INT_MAX);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // One arena for every thread: a stage worker's own arena grows in heaps of at most 64 MiB,
  // maps larger blocks afresh and unmaps heaps that empty (U-Net at batch 64, one stage:
  // 1260 ms per step with per-thread arenas, 526 ms without). The price is one lock for all
  // stage threads.
  mallopt(M_ARENA_MAX, 1);
#endif
}

}  // namespace pipebal::workflow
