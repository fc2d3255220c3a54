// Keeps freed CPU memory in the process instead of returning it to the kernel, without making
// the stage threads queue for one allocator lock.
//
// With glibc's defaults, every large tensor is its own mmap and is unmapped when freed (and
// threads other than the main one get arenas that do the same), so each training step
// page-faults its activations in again; per-layer profiling, with its small working set, never
// sees that cost, and the balancer's predictions would miss it (reports/profiler-bench.md).
// Forcing glibc into one arena fixes that but makes concurrent stages contend for its lock
// (AmoebaNet-D, 2 stages: 2-3x slower actions, reports/validation-accuracy.md). pipebal's
// programs therefore allocate through jemalloc when it is installed — per-thread arenas, freed
// pages kept (no decay): workflow/jemalloc_conf.cpp — and fall back to that glibc tuning where it
// is not. The installed libraries do not link jemalloc: a program of yours that calls
// keep_freed_memory_in_process() gets the glibc tuning, or, where it links or preloads jemalloc,
// freed pages kept (the block reuse too with MALLOC_CONF=lg_extent_max_active_fit:20, which
// jemalloc reads only at start-up).
#pragma once

namespace pipebal::workflow {

// Call once at start-up, before the first tensor is allocated.
void keep_freed_memory_in_process();

}  // namespace pipebal::workflow
