// See supervisor.h.
#include "pipebal/distributed/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/distributed/launcher_signals.h"

namespace pipebal::distributed {
namespace {

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
      const int failed = follower_->failed_rank;
      const std::string whose = failed >= 0 && !is_local(failed)
                                    ? whose_failure()
                                    : "the failure of a rank on another host";
      relay_.say(fmt::format("{}: rank {} {}{}", options_.log_prefix, follower_->rank,
                             describe(follower_->ending),
                             options_.nnodes > 1 ? " (stopped by " + whose + ")" : ""));
      result_ = exit_code(follower_->ending);
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
  // Whether `rank` is one of this host's processes.
  bool is_local(int rank) const {
    const int local = rank - first_rank_;
    return local >= 0 && local < static_cast<int>(children_.pids.size());
  }
  // Whether `rank` is one of this host's processes and has not ended.
  bool runs_here(int rank) const {
    return is_local(rank) && !children_.ended[static_cast<size_t>(rank - first_rank_)];
  }
  // Whose failure the first echo named: a rank still running here, one on another host, or, where
  // it named none (or one of this host's that has ended since, without failing), another's.
  std::string whose_failure() const {
    const int failed = follower_->failed_rank;
    if (runs_here(failed)) return fmt::format("rank {}'s failure", failed);
    if (failed >= 0 && !is_local(failed)) {
      return fmt::format("the failure of rank {} on another host", failed);
    }
    return "another's failure";
  }
  // "rank 1", "ranks 1, 2": the ranks whose processes have not ended.
  std::string still_running() const {
    std::vector<int> ranks;
    for (size_t local = 0; local < children_.pids.size(); ++local) {
      if (!children_.ended[local]) ranks.push_back(first_rank_ + static_cast<int>(local));
    }
    return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
  }

  void follow_the_launchers_signals() {
    // Ctrl-Z: the processes stop, then the launcher; `fg` or `bg` wakes them all.
    if (take_suspend()) {
      signal_all(SIGTSTP);
      raise(SIGSTOP);
      signal_all(SIGCONT);
    }
    // Asked again (Ctrl-C a second time): no more grace. Not a second copy of the first signal
    // (`timeout` sends it to the process, then to its group), which comes at once.
    if (interrupts_received() > interrupts_seen_) {
      if (interrupts_seen_ > 0 && Clock::now() - first_interrupt_ > std::chrono::seconds(1)) {
        kill_at_ = Clock::now();
      }
      if (interrupts_seen_ == 0) first_interrupt_ = Clock::now();
      interrupts_seen_ = interrupts_received();
    }
    if (interrupt_signal() != 0 && forwarded_ != interrupt_signal()) {
      forwarded_ = interrupt_signal();
      stop_all(forwarded_);
      terminate_at_ = Clock::time_point::max();
      if (!stopping_) {
        result_ = 128 + forwarded_;
        relay_.say(fmt::format("{}: {}; stopping {}", options_.log_prefix,
                               forwarded_ == SIGINT    ? "interrupted"
                               : forwarded_ == SIGHUP  ? "hung up"
                               : forwarded_ == SIGQUIT ? "quit"
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
      const int failed = follower_->failed_rank;
      if (options_.nnodes > 1 && !runs_here(failed)) {
        // The failure may be on another host: these may only be slow to follow.
        result_ = exit_code(follower_->ending);
        relay_.say(fmt::format(
            "{}: rank {} {} (stopped by {}); {} still running {:g} s later: stopping {}",
            options_.log_prefix, follower_->rank, describe(follower_->ending), whose_failure(),
            processes(running_), follower_wait_s_, running_ == 1 ? "it" : "them"));
      } else {
        // The one that failed is here, still running (stopped, hung where its own --timeout
        // cannot reach, or slow to end); on one host, where it is not named, it is among those
        // still running, as none ended on a failure of its own. A failure of the run, not an
        // echo of one.
        result_ = 1;
        const std::string which =
            runs_here(failed)
                ? (running_ == 1 ? ""
                                 : fmt::format(", among them rank {}, the one that failed", failed))
            : running_ == 1 ? ", the one that failed"
                            : ", the one that failed among them";
        relay_.say(fmt::format(
            "{}: rank {} {} (stopped by {}); {} still running {:g} s later{} (stopped, hung, "
            "or slow to end): stopping {}",
            options_.log_prefix, follower_->rank, describe(follower_->ending), whose_failure(),
            still_running(), follower_wait_s_, which, running_ == 1 ? "it" : "them"));
      }
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
    // Taken before looking: a SIGCHLD from now on is looked at next time.
    if (!take_child_signal() && Clock::now() < next_look_) return false;
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
        follower_ = Follower{rank, *ending, notices_.failed_rank(rank)};
        followed_until_ = Clock::now() + seconds(follower_wait_s_);
      } else if (follower_->failed_rank < 0) {  // the first did not say which rank failed
        follower_->failed_rank = notices_.failed_rank(rank);
      }
      return true;
    }
    if (ending->failed() && !stopping_) {
      stopping_ = true;
      result_ = exit_code(*ending);
      relay_.pump(std::chrono::milliseconds(0));  // the others' lines so far come before the news
      if (running_ > 0) {
        relay_.say(fmt::format("{}: rank {} {}; stopping the other {}", options_.log_prefix, rank,
                               describe(*ending), running_ == 1 ? "process" : processes(running_)));
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
  // The first to exit with kPeerFailedExitStatus, having said it stopped for another's failure.
  struct Follower {
    int rank;
    Ending ending;
    int failed_rank;  // the rank it said failed; -1: it did not say
  };
  std::optional<Follower> follower_;
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

Launched::~Launched() {
  if (reaped) return;
  for (const pid_t pid : pids) kill(-pid, SIGKILL);
  reap_all();
}

void Launched::reap_all() {
  for (const pid_t pid : pids) reap(pid);
  reaped = true;
}

int supervise(const LaunchOptions& options, int first_rank, Launched& children, StderrRelay& relay,
              PeerFailureNotices& notices) {
  return Supervisor(options, first_rank, children, relay, notices).run();
}

}  // namespace pipebal::distributed
