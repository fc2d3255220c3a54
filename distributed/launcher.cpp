// See launcher.h.
#include "distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/time_limit.h"

namespace pipebal::distributed {
namespace {

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_interrupts = 0;  // how many arrived: a second one kills at once

void on_interrupt(int signal) {
  g_interrupt = signal;
  g_interrupts = g_interrupts + 1;
}

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

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return fmt::format("was killed by signal {} (SIG{})", signal, name ? name : "?");
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// In the child: torchrun's environment, then the command. Never returns.
[[noreturn]] void run_child(const LaunchOptions& options, int port, int local_rank,
                            pid_t launcher) {
  // Die with the launcher (no orphans), even if it dies before this line runs.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(137);
  // A process group of its own, which the launcher stops whole: what the command starts in
  // turn (a shell's children, a profiler's target) goes with it.
  setpgid(0, 0);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  const int world = options.nproc_per_node * options.nnodes;
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node).c_str(), 1);
  setenv("GROUP_RANK", std::to_string(options.node_rank).c_str(), 1);
  setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");  // the launcher serves no store: rank 0 does
  if (options.discard_stdout) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
  }
  std::vector<char*> argv;
  for (const auto& arg : options.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const std::string message = fmt::format("pipebal launch: cannot run '{}': {}\n",
                                          options.command[0], std::strerror(errno));
  (void)!write(STDERR_FILENO, message.data(), message.size());
  _exit(127);
}

// Whether execvp would find `program` (a path when it has a slash, else on PATH) executable.
bool runnable(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
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
  if (!runnable(options.command[0])) {
    throw std::invalid_argument(fmt::format("cannot run '{}': {}", options.command[0],
                                            options.command[0].find('/') != std::string::npos
                                                ? "no such executable"
                                                : "no such executable on PATH"));
  }
  check_time_limit(options.grace_s, "--grace");
}

int last_interrupt() {
  return g_interrupt;
}

int launch(const LaunchOptions& options, std::ostream& log) {
  check(options);
  g_interrupt = 0;
  g_interrupts = 0;
  const int port = options.master_port == 0 ? free_port() : options.master_port;
  struct sigaction action {};
  action.sa_handler = on_interrupt;  // no SA_RESTART: waitpid returns to pass the signal on
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  std::vector<pid_t> children;
  const pid_t launcher = getpid();
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const pid_t pid = fork();
    if (pid < 0) {
      log << options.log_prefix << ": fork failed: " << std::strerror(errno) << "\n";
      for (pid_t child : children) kill(-child, SIGKILL);
      for (pid_t child : children) waitpid(child, nullptr, 0);
      return 1;
    }
    if (pid == 0) run_child(options, port, local, launcher);
    setpgid(pid, pid);  // as the child does: whichever runs first, the group exists after
    children.push_back(pid);
  }

  const int first_rank = options.node_rank * options.nproc_per_node;
  auto rank_of = [&](pid_t pid) {
    for (size_t i = 0; i < children.size(); ++i)
      if (children[i] == pid) return first_rank + static_cast<int>(i);
    return -1;
  };
  auto stop_all = [&](int signal) {
    for (pid_t child : children) {
      if (child <= 0) continue;
      kill(-child, signal);  // its process group
      // A process stopped (SIGSTOP, Ctrl-Z) acts on a signal once it runs again.
      if (signal != SIGKILL) kill(-child, SIGCONT);
    }
  };
  int running = options.nproc_per_node;
  int result = 0;
  bool stopping = false;
  std::optional<std::pair<int, int>> follower;  // (rank, status) of the first kPeerFailedExitStatus
  int forwarded = 0;
  int interrupts_seen = 0;
  using Clock = std::chrono::steady_clock;
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point first_interrupt;
  while (running > 0) {
    // Asked again (Ctrl-C a second time): no more grace. Not a second copy of the first signal
    // (`timeout` sends it to the process, then to its group), which comes at once.
    if (g_interrupts > interrupts_seen) {
      if (interrupts_seen > 0 && Clock::now() - first_interrupt > std::chrono::seconds(1)) {
        kill_at = Clock::now();
      }
      if (interrupts_seen == 0) first_interrupt = Clock::now();
      interrupts_seen = g_interrupts;
    }
    if (g_interrupt != 0 && forwarded != g_interrupt) {
      forwarded = g_interrupt;
      stop_all(forwarded);
      if (!stopping) {
        result = 128 + forwarded;
        log << fmt::format("{}: {}; stopping {} process{}\n", options.log_prefix,
                           forwarded == SIGINT ? "interrupted" : "terminated", running,
                           running == 1 ? "" : "es")
            << std::flush;
      }
      stopping = true;
      kill_at =
          std::min(kill_at, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options.grace_s)));
    }
    if (Clock::now() >= kill_at) {
      stop_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    int status = 0;
    // Polled: a signal that came between the checks above and a blocking wait would not be
    // passed on until a process ended.
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // no children left
    }
    const int rank = rank_of(pid);
    if (rank < 0) continue;
    children[rank - first_rank] = -1;
    --running;
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // One that stopped because another failed may exit before the one that failed: wait for
    // that one (the rest stop by themselves), and report it.
    if (failed && WIFEXITED(status) && WEXITSTATUS(status) == kPeerFailedExitStatus) {
      if (!follower) follower = std::make_pair(rank, status);
      continue;
    }
    if (failed && !stopping) {
      stopping = true;
      result = exit_code(status);
      if (running > 0) {
        log << fmt::format("{}: rank {} {}; stopping the other {} process{}\n", options.log_prefix,
                           rank, describe(status), running, running == 1 ? "" : "es");
      } else {
        log << fmt::format("{}: rank {} {}\n", options.log_prefix, rank, describe(status));
      }
      log << std::flush;
      stop_all(SIGTERM);
      kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options.grace_s));
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (result == 0 && follower) {  // the failure was on another host
    log << fmt::format("{}: rank {} {} (stopped because a rank on another host failed)\n",
                       options.log_prefix, follower->first, describe(follower->second))
        << std::flush;
    result = exit_code(follower->second);
  }
  return result;
}

}  // namespace pipebal::distributed
