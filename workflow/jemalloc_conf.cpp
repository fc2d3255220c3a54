// jemalloc's settings for pipebal's programs (workflow/CMakeLists.txt links this object, and
// jemalloc, into them; the installed libraries carry neither). jemalloc reads `malloc_conf` when
// the process starts. Never hand freed pages back to the kernel, so a step reuses the previous
// step's memory instead of faulting it in again (with the default decay a one-stage U-Net step
// took 6.4 s instead of 0.48 s). And reuse a freed block for any smaller request: jemalloc's
// default (at most 64x larger) made the profiler's repeated passes over AmoebaNet-D take fresh
// memory every pass, 6 MiB more each, faulted in anew, which made its layer times 1.7x slower and
// erratic.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:20";
}
