// The cores this process may run on: its CPU affinity (taskset, numactl, a batch system's
// cpuset) within its control group's CPU quota (a container's), not every core the machine has.
// What a thread count is checked against; the machine's load is read over the affinity's cores
// (machine_load.h). Cores here are logical CPUs, a physical core's hardware threads counted
// apart, but where physical_cores() groups them. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipebal {

// The cores this process may run on, in order; empty where not known. The set remembered by
// remember_startup_cores() when it was called, else the calling thread's affinity now.
std::vector<int> allowed_cpus();

// The CPU time this process's control group may use, in cores: a container's --cpus, a
// Kubernetes pod's CPU limit, systemd's CPUQuota. The tightest quota of its cgroups
// (common/cgroups.h: from its own up to the part of the hierarchy mounted), read from cgroup v2's
// cpu.max or v1's cpu.cfs_quota_us over cpu.cfs_period_us, with the directory of the cgroup that
// sets it (whose cpu.stat counts how often it held its processes back); nullopt where none is
// set or none can be read. `root` prefixes every path read, for tests.
struct CpuQuota {
  double cores = 0;
  std::string cgroup_dir;
};
std::optional<CpuQuota> cpu_quota(const std::string& root = "");

// The cores `affinity` CPUs can use under a quota of `quota_cores`: the quota rounded up (1.5
// cores keep two threads going part of the time), at most the CPUs, at least 1.
int cores_within_quota(int affinity, std::optional<double> quota_cores);

// How many cores this process may run on: allowed_cpus()'s count (else the machine's online
// cores) within its cgroup's CPU quota; at least 1.
int usable_cores();

// "the 2 cores pipebal may run on", or where a CPU quota sets that count "the 1 core that
// pipebal's CPU quota of 0.50 cores lets it run on": what a thread count is checked against, for
// messages.
std::string usable_cores_text();

// `cpus` grouped by the physical core whose hardware threads they are (sysfs's
// thread_siblings_list: "0,8" on a machine numbering a core's second threads after its first
// ones), in the order of each core's first CPU in `cpus`; a CPU whose siblings cannot be read is
// a core of its own. `root` prefixes the paths read, for tests.
std::vector<std::vector<int>> physical_cores(const std::vector<int>& cpus,
                                             const std::string& root = "");

// The CPUs the calling thread may run on now (its affinity).
std::vector<int> this_thread_cpus();

// Remembers the calling thread's affinity as the process's, for allowed_cpus() from then on.
// For a command's start: OpenMP binds a thread that has run a parallel region to one core
// (OMP_PROC_BIND), and the main thread's affinity would then say one core.
void remember_startup_cores();

}  // namespace pipebal
