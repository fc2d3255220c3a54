// Keeps freed CPU memory in the process instead of returning it to the kernel.
//
// With glibc's defaults, every large tensor is its own mmap and is unmapped when freed (and
// threads other than the main one get arenas that do the same), so each training step
// page-faults its activations in again; per-layer profiling, with its small
// working set, never sees that cost, and the balancer's predictions would miss it (measured in
// reports/profiler-bench.md). pipebal therefore runs profile and training alike with the
// caching behaviour a training process wants.
#pragma once

namespace pipebal::tools {

// Call once at start-up, before the first tensor is allocated.
void keep_freed_memory_in_process();

}  // namespace pipebal::tools
