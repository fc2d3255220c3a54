// Watching another process of this host end, without its help: a rank killed with SIGKILL or
// crashed says nothing, and its peers must not wait for their timeout to learn of it. Each
// process publishes its identity; a peer on the same kernel and in the same pid namespace opens
// a handle on it (a pidfd where the kernel has them, else -pid) and polls it. Torch-free.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace pipebal::distributed {

// This process as another may find it: the kernel's boot id, its pid namespace, its pid and its
// start time; "" when /proc does not say.
std::string process_identity();

// A handle on the process that published `identity` (process_identity()), when it runs on this
// kernel, in this pid namespace, and is still that process (its start time confirms the pid);
// nullopt otherwise (another host, or a process already gone: not watched rather than taken
// for ended).
std::optional<int> watch_process(const std::string& identity);

// A handle on process `pid` of this host: a pidfd, else -pid.
int process_handle(pid_t pid);

// Whether the process of `handle` has ended (reaped or not: a zombie has ended).
bool process_ended(int handle);

// Releases a handle from watch_process() or process_handle().
void close_process_handle(int handle);

}  // namespace pipebal::distributed
