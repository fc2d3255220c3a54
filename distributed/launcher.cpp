// See launcher.h.
#include "pipebal/distributed/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/common/cores.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/distributed/launched_process.h"
#include "pipebal/distributed/launcher_signals.h"
#include "pipebal/distributed/peer_failure_notice.h"
#include "pipebal/distributed/stderr_relay.h"
#include "pipebal/distributed/supervisor.h"

namespace pipebal::distributed {
namespace {

// A port no socket of this host listens on now (the kernel's pick for port 0).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(fd);
  if (!ok) throw std::runtime_error(std::string("finding a free port: ") + std::strerror(errno));
  return ntohs(address.sin_port);
}

}  // namespace

void check(const LaunchOptions& options) {
  constexpr int kMaxProcesses = 1024;
  if (options.nproc_per_node < 1 || options.nproc_per_node > kMaxProcesses) {
    throw std::invalid_argument(fmt::format("--nproc-per-node must be between 1 and {}, got {}",
                                            kMaxProcesses, options.nproc_per_node));
  }
  if (options.nnodes < 1 || options.nnodes > kMaxProcesses) {
    throw std::invalid_argument(
        fmt::format("--nnodes must be between 1 and {}, got {}", kMaxProcesses, options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw std::invalid_argument(
        fmt::format("--node-rank must be between 0 and {} (--nnodes {}), got {}",
                    options.nnodes - 1, options.nnodes, options.node_rank));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    throw std::invalid_argument(
        fmt::format("--master-port must be between 0 and 65535, got {}", options.master_port));
  }
  if (options.master_port == 0 && options.nnodes > 1) {
    throw std::invalid_argument(
        "--master-port 0 (any free port) works on one node only: give "
        "every node the same port");
  }
  if (options.master_addr.empty()) throw std::invalid_argument("--master-addr must not be empty");
  if (options.command.empty()) {
    throw std::invalid_argument(
        "give the command to run after --, e.g. pipebal launch --nproc-per-node 2 -- pipebal "
        "train --balance 3,2");
  }
  std::string why;
  if (!resolve_program(options.command[0], why)) {
    throw std::invalid_argument(fmt::format("cannot run '{}': {}", options.command[0], why));
  }
  check_time_limit(options.grace_s, "--grace");
  if (options.bind_cores) {
    const std::vector<int> cpus = allowed_cpus();
    if (cpus.empty()) {
      throw std::invalid_argument("--bind-cores: cannot read the cores this launcher may run on");
    }
    if (cpus.size() < size_t(options.nproc_per_node)) {
      throw std::invalid_argument(fmt::format(
          "--bind-cores: the {} core{} this launcher may run on cannot give each of {} processes "
          "one of its own",
          cpus.size(), cpus.size() == 1 ? "" : "s", options.nproc_per_node));
    }
  }
  // Every line waits this long: more than a minute is a typo, not a choice.
  constexpr double kLongestFoldWindowS = 60;
  if (!(options.fold_window_s >= 0 && options.fold_window_s <= kLongestFoldWindowS)) {
    throw std::invalid_argument(fmt::format(
        "--fold-within must be from 0 to {:g} seconds (0: the processes write to standard "
        "error themselves), got {}",
        kLongestFoldWindowS, options.fold_window_s));
  }
}

std::vector<std::vector<int>> core_shares(const std::vector<std::vector<int>>& cores,
                                          int processes) {
  std::vector<std::vector<int>> units = cores;  // what is shared out whole
  size_t cpus = 0;
  for (const auto& core : cores) cpus += core.size();
  if (processes < 1 || size_t(processes) > cpus) {
    throw std::invalid_argument(
        fmt::format("{} cores cannot be shared among {} processes", cpus, processes));
  }
  if (units.size() < size_t(processes)) {  // too few cores: their hardware threads apart
    units.clear();
    for (const auto& core : cores) {
      for (const int cpu : core) units.push_back({cpu});
    }
  }
  std::vector<std::vector<int>> shares(processes);
  const size_t each = units.size() / processes, longer = units.size() % processes;
  size_t next = 0;
  for (size_t p = 0; p < shares.size(); ++p) {
    const size_t count = each + (p < longer ? 1 : 0);
    for (size_t u = next; u < next + count; ++u) {
      shares[p].insert(shares[p].end(), units[u].begin(), units[u].end());
    }
    std::sort(shares[p].begin(), shares[p].end());
    next += count;
  }
  return shares;
}

int last_interrupt() {
  return interrupt_signal();
}

int launch(const LaunchOptions& options, std::ostream& log) {
  check(options);
  const LauncherSignals signals;  // its notes cleared before anything can fail
  std::string why;
  const std::string program = *resolve_program(options.command[0], why);  // check() found it
  const int port = options.master_port == 0 ? free_port() : options.master_port;
  const int first_rank = options.node_rank * options.nproc_per_node;
  StderrRelay relay(options.nproc_per_node, first_rank,
                    std::chrono::duration_cast<LineFolder::Clock::duration>(
                        std::chrono::duration<double>(options.fold_window_s)),
                    log);

  PeerFailureNotices notices;
  Launched children;
  const pid_t launcher = getpid();
  const std::vector<std::vector<int>> cores =
      options.bind_cores ? core_shares(physical_cores(allowed_cpus()), options.nproc_per_node)
                         : std::vector<std::vector<int>>(options.nproc_per_node);
  for (int local = 0; local < options.nproc_per_node; ++local) {
    ChildImage image;
    make_child_image(options, program, port, local, cores[local], notices.write_end(),
                     notices.variable_value(), image);
    sigset_t every, before;
    sigfillset(&every);
    pthread_sigmask(SIG_SETMASK, &every, &before);
    const pid_t pid = fork();
    if (pid == 0) {
      run_child(image, options.discard_stdout, relay.write_end(local), launcher, before);
    }
    const int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (pid < 0) {
      relay.say(options.log_prefix + ": fork failed: " + std::strerror(fork_error));
      for (const pid_t child : children.pids) kill(-child, SIGKILL);
      children.reap_all();
      relay.close_write_ends();
      relay.finish();
      return 1;
    }
    setpgid(pid, pid);  // as the child does: whichever runs first, the group exists after
    children.pids.push_back(pid);
    children.ended.push_back(false);
  }
  relay.close_write_ends();

  return supervise(options, first_rank, children, relay, notices);
}

}  // namespace pipebal::distributed
