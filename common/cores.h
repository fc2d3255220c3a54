// The cores this process may run on: its CPU affinity (taskset, numactl, a batch system's
// cpuset), not every core the machine has. What a thread count is checked against, and what the
// machine's load is read over (machine_load.h). Torch-free.
#pragma once

#include <vector>

namespace pipebal {

// The cores this process may run on (sched_getaffinity), in order; empty where not known.
std::vector<int> allowed_cpus();

// How many cores this process may run on: allowed_cpus()'s count, else the machine's online
// cores; at least 1.
int usable_cores();

}  // namespace pipebal
