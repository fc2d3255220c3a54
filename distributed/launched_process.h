// The child's side of `pipebal launch`: what each launched process runs (its program found on
// PATH, its arguments, torchrun's environment), prepared before the fork, and what the child
// does between the fork and the exec. Torch-free.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <signal.h>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/distributed/launcher.h"

namespace pipebal::distributed {

// The file execve() runs for `program`, searched on PATH as execvp() would when it has no slash;
// none when there is no such file, or it is not a regular file this process may execute.
// `why` says which.
std::optional<std::string> resolve_program(const std::string& program, std::string& why);

// What a process runs: its program, arguments and environment, made before the fork. The
// child of a process with threads (validate --processes forks while LibTorch's pools are up)
// may call only async-signal-safe functions until it execs: no allocation, no setenv.
struct ChildImage {
  std::string program;             // resolved (resolve_program)
  std::vector<std::string> words;  // the command
  std::vector<std::string> environment;
  std::vector<char*> argv, envp;  // point into the strings above: never copied
  std::string exec_failed;        // the start of the line written should exec fail
  bool bind = false;              // pinned to `cores` (LaunchOptions::bind_cores)
  cpu_set_t cores;
  std::string bind_failed;  // the start of the line written should pinning fail
  int notice_fd = -1;       // kept open across the exec (PeerFailureNotices), when not -1

  ChildImage() = default;
  ChildImage(const ChildImage&) = delete;
  ChildImage& operator=(const ChildImage&) = delete;
};

// The image of local rank `local_rank`: the command, with torchrun's environment over this
// process's own (its agent-store switch left out: the launcher serves no store, rank 0 does). As
// torchrun, one OpenMP thread per process unless OMP_NUM_THREADS says otherwise, where several
// share the host's cores; with --bind-cores OpenMP counts each one's own cores.
void make_child_image(const LaunchOptions& options, const std::string& program, int port,
                      int local_rank, const std::vector<int>& cores, int notice_fd,
                      const std::string& notice_value, ChildImage& image);

// In the child: the image prepared above, with the signal mask `mask` (the launcher blocks every
// signal around fork: one that comes before the exec must not run the launcher's handler in the
// child, where it would be lost). Never returns.
[[noreturn]] void run_child(const ChildImage& image, bool discard_stdout, int stderr_fd,
                            pid_t launcher, const sigset_t& mask);

}  // namespace pipebal::distributed
