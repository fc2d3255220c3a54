// The cores this process may run on: its CPU affinity (taskset, numactl, a batch system's
// cpuset), not every core the machine has. What a thread count is checked against, and what the
// machine's load is read over (machine_load.h). Cores here are logical CPUs, a physical core's
// hardware threads counted apart. Torch-free.
#pragma once

#include <vector>

namespace pipebal {

// The cores this process may run on, in order; empty where not known. The set remembered by
// remember_startup_cores() when it was called, else the calling thread's affinity now.
std::vector<int> allowed_cpus();

// How many cores this process may run on: allowed_cpus()'s count, else the machine's online
// cores; at least 1.
int usable_cores();

// Remembers the calling thread's affinity as the process's, for allowed_cpus() from then on.
// For a command's start: OpenMP binds a thread that has run a parallel region to one core
// (OMP_PROC_BIND), and the main thread's affinity would then say one core.
void remember_startup_cores();

}  // namespace pipebal
