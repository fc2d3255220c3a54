// See launcher.h.
#include "pipebal/distributed/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "pipebal/common/cores.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/distributed/launched_process.h"
#include "pipebal/distributed/peer_failure_notice.h"
#include "pipebal/distributed/stderr_relay.h"

namespace pipebal::distributed {
namespace {

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_interrupts = 0;  // how many arrived: a second one kills at once
volatile sig_atomic_t g_suspend = 0;     // Ctrl-Z: the processes stop with the launcher
volatile sig_atomic_t g_children = 0;    // a process ended, stopped or went on (SIGCHLD)

void on_interrupt(int signal) {
  g_interrupt = signal;
  g_interrupts = g_interrupts + 1;
}

void on_suspend(int) {
  g_suspend = 1;
}

void on_child(int) {
  g_children = 1;
}

// The launcher's handlers while it runs; the caller's back on every way out.
class LauncherSignals {
 public:
  LauncherSignals() {
    struct sigaction action {};
    sigemptyset(&action.sa_mask);
    action.sa_handler = on_interrupt;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    // A closed terminal stops the processes as Ctrl-C does, unless ignored (nohup).
    sigaction(SIGHUP, nullptr, &old_hup_);
    if (old_hup_.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);
    action.sa_handler = on_suspend;
    sigaction(SIGTSTP, &action, &old_tstp_);
    // Tells the launcher when to look at its processes. (Inherited as ignored, by a parent that
    // does not wait for its children, SIGCHLD would make the kernel reap them, and their exit
    // statuses would be lost.)
    action.sa_handler = on_child;
    action.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &action, &old_chld_);
  }
  ~LauncherSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    sigaction(SIGTSTP, &old_tstp_, nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
  }
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_tstp_ {};
  struct sigaction old_chld_ {};
};

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

// How a process ended: its exit status, or the signal that killed it.
struct Ending {
  int status = 0;  // when it exited
  int signal = 0;  // the signal that killed it; 0 when it exited
  bool failed() const { return signal != 0 || status != 0; }
};

std::string describe(const Ending& ending) {
  if (ending.signal != 0) {
    const char* name = sigabbrev_np(ending.signal);
    return fmt::format("was killed by signal {} (SIG{})", ending.signal, name ? name : "?");
  }
  return fmt::format("exited with status {}", ending.status);
}

int exit_code(const Ending& ending) {
  return ending.signal != 0 ? 128 + ending.signal : ending.status;
}

// How `pid` ended, once it has, or nullopt while it runs. It is left a zombie (WNOWAIT) until
// reap(): its id, and so its process group's, cannot be given to another process while the
// launcher may still signal that group.
std::optional<Ending> ending_of(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    // Not a child any more: something else of this process waited for it, and took its status.
    if (errno == ECHILD) return Ending{255, 0};
    return std::nullopt;  // EINTR: asked again on the next round
  }
  if (info.si_pid == 0) return std::nullopt;
  if (info.si_code == CLD_EXITED) return Ending{info.si_status, 0};
  return Ending{0, info.si_status};  // CLD_KILLED, CLD_DUMPED
}

// The signal that stopped `pid` since the last call, or 0. Of the launcher's own processes only:
// one that a process starts in turn is not seen.
int stop_of(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, pid, &info, WSTOPPED | WNOHANG) != 0 || info.si_pid == 0) return 0;
  return info.si_status;
}

void reap(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// The processes launched, each the first of a process group of its own, which the launcher
// signals whole (what a process starts may outlive it). They are reaped only at the end
// (ending_of), so that no group's id can pass to another process meanwhile; should launch() leave
// early (an exception), what is left of them is killed and reaped.
struct Launched {
  std::vector<pid_t> pids;
  std::vector<bool> ended;
  bool reaped = false;

  Launched() = default;
  Launched(const Launched&) = delete;
  Launched& operator=(const Launched&) = delete;
  ~Launched() {
    if (reaped) return;
    for (const pid_t pid : pids) kill(-pid, SIGKILL);
    reap_all();
  }
  void reap_all() {
    for (const pid_t pid : pids) reap(pid);
    reaped = true;
  }
};

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Watches the launched processes to their end: passes the launcher's signals on to them, and
// after the first failure (or interrupt) stops the rest, SIGTERM then SIGKILL, and says which
// process failed first.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, int first_rank, Launched& children, StderrRelay& relay,
             PeerFailureNotices& notices)
      : options_(options),
        first_rank_(first_rank),
        children_(children),
        relay_(relay),
        notices_(notices),
        running_(static_cast<int>(children.pids.size())),
        grace_(seconds(options.grace_s)),
        follower_wait_s_(std::max(options.grace_s, 5.0)),
        terminate_delay_(seconds(std::min(options.fold_window_s, 2.0))) {}

  // Until every process has ended; the launch's exit status.
  int run() {
    while (running_ > 0) {
      follow_the_launchers_signals();
      keep_deadlines();
      // Polled (every 20 ms, relaying their output meanwhile): a signal that came between the
      // checks above and a blocking wait would not be passed on until a process ended. The
      // processes are looked at after a SIGCHLD (and once a second, should one have been
      // missed).
      if (!look_at_processes()) relay_.pump(std::chrono::milliseconds(20));
    }
    // A failed run leaves nothing behind: what the processes started, even those that ended.
    if (stopping_) signal_all(SIGKILL);
    children_.reap_all();
    if (result_ == 0 && follower_) {  // the failure was on another host, if there is one
      relay_.say(fmt::format(
          "{}: rank {} {}{}", options_.log_prefix, follower_->first, describe(follower_->second),
          options_.nnodes > 1 ? " (stopped because a rank on another host failed)" : ""));
      result_ = exit_code(follower_->second);
    }
    relay_.finish();
    return result_;
  }

 private:
  // To every group, those whose first process has ended too (what it started may live on).
  void signal_all(int signal) {
    for (const pid_t child : children_.pids) kill(-child, signal);
  }
  void stop_all(int signal) {
    signal_all(signal);
    // A process stopped (SIGSTOP, Ctrl-Z) acts on a signal once it runs again.
    if (signal != SIGKILL) signal_all(SIGCONT);
  }
  std::string processes(int count) const {
    return fmt::format("{} process{}", count, count == 1 ? "" : "es");
  }

  void follow_the_launchers_signals() {
    // Ctrl-Z: the processes stop, then the launcher; `fg` or `bg` wakes them all.
    if (g_suspend != 0) {
      g_suspend = 0;
      signal_all(SIGTSTP);
      raise(SIGSTOP);
      signal_all(SIGCONT);
    }
    // Asked again (Ctrl-C a second time): no more grace. Not a second copy of the first signal
    // (`timeout` sends it to the process, then to its group), which comes at once.
    if (g_interrupts > interrupts_seen_) {
      if (interrupts_seen_ > 0 && Clock::now() - first_interrupt_ > std::chrono::seconds(1)) {
        kill_at_ = Clock::now();
      }
      if (interrupts_seen_ == 0) first_interrupt_ = Clock::now();
      interrupts_seen_ = g_interrupts;
    }
    if (g_interrupt != 0 && forwarded_ != g_interrupt) {
      forwarded_ = g_interrupt;
      stop_all(forwarded_);
      terminate_at_ = Clock::time_point::max();
      if (!stopping_) {
        result_ = 128 + forwarded_;
        relay_.say(fmt::format("{}: {}; stopping {}", options_.log_prefix,
                               forwarded_ == SIGINT   ? "interrupted"
                               : forwarded_ == SIGHUP ? "hung up"
                                                      : "terminated",
                               processes(running_)));
      }
      stopping_ = true;
      kill_at_ = std::min(kill_at_, Clock::now() + grace_);
    }
  }

  void keep_deadlines() {
    if (!stopping_ && Clock::now() >= followed_until_) {
      stopping_ = true;
      result_ = exit_code(follower_->second);
      relay_.say(fmt::format(
          "{}: rank {} {} (stopped by another's failure); {} still running {:g} s later: "
          "stopping {}",
          options_.log_prefix, follower_->first, describe(follower_->second), processes(running_),
          follower_wait_s_, running_ == 1 ? "it" : "them"));
      stop_all(SIGTERM);
      kill_at_ = Clock::now() + grace_;
    }
    if (Clock::now() >= terminate_at_) {
      stop_all(SIGTERM);
      terminate_at_ = Clock::time_point::max();
      kill_at_ = Clock::now() + grace_;
    }
    if (Clock::now() >= kill_at_) {
      stop_all(SIGKILL);
      kill_at_ = Clock::time_point::max();
    }
  }

  // Whether any process stopped or ended since the last look.
  bool look_at_processes() {
    if (g_children == 0 && Clock::now() < next_look_) return false;
    g_children = 0;  // before looking: a SIGCHLD from now on is looked at next time
    next_look_ = Clock::now() + std::chrono::seconds(1);
    bool changed = false;
    for (size_t local = 0; local < children_.pids.size(); ++local) {
      if (!children_.ended[local]) changed = look_at(local) || changed;
    }
    return changed;
  }

  bool look_at(size_t local) {
    const int rank = first_rank_ + static_cast<int>(local);
    bool changed = false;
    // One that uses the terminal as the launcher may (ignoring SIGTTIN or SIGTTOU, run_child)
    // would wait forever for a `fg` that cannot wake it in the background: a failure.
    const int stopped_by = stop_of(children_.pids[local]);
    if ((stopped_by == SIGTTIN || stopped_by == SIGTTOU) && !stopping_) {
      changed = true;
      stopping_ = true;
      result_ = 1;
      relay_.pump(std::chrono::milliseconds(0));
      relay_.say(fmt::format(
          "{}: rank {} was stopped for {} the terminal, which the processes may not (they run in "
          "the background{}); stopping {}",
          options_.log_prefix, rank, stopped_by == SIGTTIN ? "reading" : "writing to",
          stopped_by == SIGTTIN ? ": give the command its input from a file" : "",
          processes(running_)));
      stop_all(SIGTERM);
      kill_at_ = Clock::now() + grace_;
    }
    const std::optional<Ending> ending = ending_of(children_.pids[local]);
    if (!ending) return changed;
    children_.ended[local] = true;
    --running_;
    relay_.drain(local);  // what it printed last comes before what the launcher says
    // One that stopped because another failed (and said so: the status alone may be the
    // command's own) may exit before the one that failed: wait for that one (the rest stop by
    // themselves), a while, and report it.
    if (ending->signal == 0 && ending->status == kPeerFailedExitStatus && notices_.noticed(rank)) {
      if (!follower_) {
        follower_ = std::make_pair(rank, *ending);
        followed_until_ = Clock::now() + seconds(follower_wait_s_);
      }
      return true;
    }
    if (ending->failed() && !stopping_) {
      stopping_ = true;
      result_ = exit_code(*ending);
      relay_.pump(std::chrono::milliseconds(0));  // the others' lines so far come before the news
      if (running_ > 0) {
        relay_.say(fmt::format("{}: rank {} {}; stopping the other {}", options_.log_prefix, rank,
                               describe(*ending), processes(running_)));
      } else {
        relay_.say(fmt::format("{}: rank {} {}", options_.log_prefix, rank, describe(*ending)));
      }
      terminate_at_ = Clock::now() + terminate_delay_;
    }
    return true;
  }

  const LaunchOptions& options_;
  const int first_rank_;
  Launched& children_;
  StderrRelay& relay_;
  PeerFailureNotices& notices_;
  int running_;
  int result_ = 0;
  bool stopping_ = false;  // after the first failure or interrupt
  int forwarded_ = 0;      // the last of the launcher's signals passed on
  int interrupts_seen_ = 0;
  const Clock::duration grace_;
  // After a rank stopped by another's failure, how long the rest may take to end by themselves
  // (the one that failed says why on its way out): it may also give no sign of life (stopped,
  // its host gone), and is not waited for forever.
  const double follower_wait_s_;
  // (rank, ending) of the first to exit with kPeerFailedExitStatus, having said it stopped for
  // another's failure.
  std::optional<std::pair<int, Ending>> follower_;
  // After the first failure the others are stopped once the fold window has passed (2 s at
  // most): a bad input fails every rank alike, and each one's line then joins the first's
  // instead of being cut off.
  const Clock::duration terminate_delay_;
  Clock::time_point first_interrupt_;
  Clock::time_point followed_until_ = Clock::time_point::max();
  Clock::time_point terminate_at_ = Clock::time_point::max();
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point next_look_ = Clock::now();
};

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
  return g_interrupt;
}

int launch(const LaunchOptions& options, std::ostream& log) {
  check(options);
  g_interrupt = 0;
  g_interrupts = 0;
  g_suspend = 0;
  g_children = 0;
  std::string why;
  const std::string program = *resolve_program(options.command[0], why);  // check() found it
  const int port = options.master_port == 0 ? free_port() : options.master_port;
  const LauncherSignals signals;
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

  return Supervisor(options, first_rank, children, relay, notices).run();
}

}  // namespace pipebal::distributed
