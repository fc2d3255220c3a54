// The control groups this process runs in, as Linux shows them (/proc/self/cgroup says which,
// /proc/self/mountinfo where their hierarchies are mounted), and the limits they set on it: what
// a container (docker --cpus / --memory), a Kubernetes pod's limits or systemd's CPUQuota and
// MemoryMax give it, whatever the machine has. cgroup v2 and v1 alike. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipebal {

// A directory of one of this process's cgroups: where its limits are files.
struct CgroupDir {
  std::string path;
  bool v2 = false;  // cgroup v2's file names (cpu.max, memory.max), else v1's
};

// The directories of this process's cgroups that can hold a limit of `controller` ("cpu",
// "memory"): in cgroup v2's hierarchy, and in v1's that has that controller, from its own cgroup
// up to the part of the hierarchy mounted (a parent's limit binds its children too), innermost
// first. A cgroup outside the part mounted (another cgroup namespace's) has none: its limits
// cannot be read, and the mount point's are not its own. `root` prefixes every path read, for
// tests.
std::vector<CgroupDir> cgroup_dirs(const std::string& controller, const std::string& root = "");

// The first line of a file; nullopt where it cannot be read.
std::optional<std::string> read_first_line(const std::string& path);

// The tightest memory limit of this process's cgroups in bytes (v2's memory.max, v1's
// memory.limit_in_bytes, whose "no limit" is a number near 2^63); nullopt where none is set.
std::optional<double> cgroup_memory_limit(const std::string& root = "");

// The memory this process may use: the machine's physical memory, or less where its cgroups
// limit it; 0 where not known.
double usable_memory_bytes();

// The machine's swap in bytes (/proc/meminfo's SwapTotal); 0 where it has none or it cannot be
// read.
double swap_bytes();

// "this machine's memory (62.8 GiB)", or where a cgroup limits it "the memory pipebal's control
// group may use (4.0 GiB)": for messages.
std::string usable_memory_text();

}  // namespace pipebal
