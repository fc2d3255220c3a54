// `pipebal launch`: starts the processes of one host of a multi-process run, the way torchrun
// does but without Python. Each process gets torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_*, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RUN_ID=none and no restarts; OMP_NUM_THREADS=1 where several share the cores and
// it is not set); the first one to fail stops the others. Torch-free.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipebal::distributed {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;           // 0: a free port of this host (one node only)
  std::vector<std::string> command;  // the program and its arguments, run once per process
  // After the first failure, how long the others get to end on SIGTERM before SIGKILL.
  double grace_s = 5;
  // How long a line the processes print on standard error is held, so that one several print
  // alike (each rank's copy of one input error) is shown once, naming the ranks that printed it;
  // 0: the processes write to the launcher's standard error themselves.
  double fold_window_s = 0.5;
  // Each process pinned to its own share of the launcher's cores (core_shares), as DeepSpeed's
  // --bind_cores_to_rank: the processes do not share cores (physical ones, each with all its
  // hardware threads, where there are as many as processes), and each counts its own
  // (common/cores.h: --threads); PIPEBAL_BIND_CORES=1 tells them so.
  bool bind_cores = false;
  bool discard_stdout = false;                // the processes' standard output goes to /dev/null
  std::string log_prefix = "pipebal launch";  // starts each line the launcher logs
};

// The exit status of a process that stopped because another one failed (distributed::PeerFailed),
// which it also tells the launcher (peer_failure_notice.h). The launcher reports the process that
// failed first, not the ones that followed it, however their exits are ordered.
constexpr int kPeerFailedExitStatus = 3;

// The CPUs of each of `processes` processes: the physical `cores` (each its hardware threads'
// logical CPUs, as common/cores.h's physical_cores() groups them) in contiguous runs, the first
// cores.size() % processes of them one core longer, so that no two processes share a core; with
// fewer cores than processes, their CPUs shared out so instead. Each share in increasing order.
// Throws std::invalid_argument unless 1 <= processes <= the CPUs.
std::vector<std::vector<int>> core_shares(const std::vector<std::vector<int>>& cores,
                                          int processes);

// Throws std::invalid_argument for inconsistent options (one line naming the option) and for a
// command this host cannot run.
void check(const LaunchOptions& options);

// Runs the processes to the end. Returns 0 when all succeeded; otherwise the status of the
// first to fail (128 + signal for one killed by a signal) after stopping the rest (SIGTERM once
// fold_window_s (2 s at most) has passed, for their own lines on a bad input they share; SIGKILL
// after grace_s more), with one line on `log` naming it; a process exiting with
// kPeerFailedExitStatus, having said it stopped for another's failure (and which rank failed,
// where it knows), counts only when no other failed, and the rest get max(grace, 5 s) after it
// to end by themselves (the one that failed may give no sign of life) before they are stopped;
// on one host (nnodes 1), or where the rank named as failed runs on this one, those are then
// named as the failure (that rank among them), and the status is 1. Each
// process runs in a process group of its own, signalled whole (what it starts goes with it; from a
// terminal the processes run in the background and cannot read it). SIGINT or SIGTERM to the
// launcher is passed on to every process, and launch() returns 128 + that signal once they are
// gone; the same signal again, a second or more later, kills them at once. Ctrl-Z (SIGTSTP) stops
// them with the launcher; one stopped for using the terminal (SIGTTIN, or SIGTTOU under
// `stty tostop`, which the processes ignore unless they reset them) is a failure, not a wait for
// ever. Each is killed should the launcher die, and after a failure or an interrupt whatever is
// left of their groups is killed too; the processes are reaped only at the end, so that no group
// id the launcher signals can have passed to another process. Their standard error comes through
// `log` (StderrRelay; fold_window_s), with the launcher's own lines after what led to them.
int launch(const LaunchOptions& options, std::ostream& log);

// The signal (SIGINT or SIGTERM) that interrupted this process's last launch(); 0 when none did.
int last_interrupt();

}  // namespace pipebal::distributed
