// See malloc_tuning.h.
#include "pipebal/workflow/malloc_tuning.h"

#include <malloc.h>
#include <sys/types.h>

#include <climits>
#include <string>

#include "pipebal/common/jemalloc_control.h"

namespace pipebal::workflow {
namespace {

// Freed pages are never handed back: the default for arenas made from now on, and each existing
// arena's own setting (an arena not yet initialised refuses, and takes the default when it is).
void never_decay(Mallctl mallctl) {
  ssize_t never = -1;
  for (const char* kind : {"dirty", "muzzy"}) {
    mallctl((std::string("arenas.") + kind + "_decay_ms").c_str(), nullptr, nullptr, &never,
            sizeof(never));
  }
  unsigned arenas = 0;
  size_t size = sizeof(arenas);
  if (mallctl("arenas.narenas", &arenas, &size, nullptr, 0) != 0) return;
  for (unsigned a = 0; a < arenas; ++a) {
    for (const char* kind : {"dirty", "muzzy"}) {
      const std::string name = "arena." + std::to_string(a) + "." + kind + "_decay_ms";
      mallctl(name.c_str(), nullptr, nullptr, &never, sizeof(never));
    }
  }
}

}  // namespace

void keep_freed_memory_in_process() {
  if (const Mallctl mallctl = jemalloc_mallctl()) {
    // pipebal's programs set this at start-up (jemalloc_conf.cpp); a program of a user's that
    // links or preloads jemalloc gets it here (the block-reuse setting can only be given at
    // start-up, in MALLOC_CONF).
    never_decay(mallctl);
    return;
  }
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
