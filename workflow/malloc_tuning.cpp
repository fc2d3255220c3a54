// See malloc_tuning.h.
#include "pipebal/workflow/malloc_tuning.h"

#include <dlfcn.h>
#include <malloc.h>

#include <climits>

namespace pipebal::workflow {

bool jemalloc_serves_this_process() {
  // jemalloc exports mallctl(); asking the process (not a header) also covers LD_PRELOAD.
  return dlsym(RTLD_DEFAULT, "mallctl") != nullptr;
}

void keep_freed_memory_in_process() {
  // jemalloc took its settings from the program (jemalloc_conf.cpp) or MALLOC_CONF at start-up.
  if (jemalloc_serves_this_process()) return;
  // glibc: serve large blocks from the heap, not from fresh mmaps, and never trim the heap.
  mallopt(M_MMAP_THRESHOLD, INT_MAX);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // One arena for every thread: a stage worker's own arena grows in heaps of at most 64 MiB,
  // maps larger blocks afresh and unmaps heaps that empty (U-Net at batch 64, one stage:
  // 1260 ms per step with per-thread arenas, 526 ms without). The price is one lock for all
  // stage threads.
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace pipebal::workflow
