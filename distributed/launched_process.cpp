// See launched_process.h.
#include "pipebal/distributed/launched_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/distributed/launch_env.h"
#include "pipebal/distributed/peer_failure_notice.h"

namespace pipebal::distributed {
namespace {

// errno's value as decimal digits and a newline, without the C library (after fork).
void write_errno_line(int error) {
  char digits[16];
  int at = sizeof digits;
  digits[--at] = '\n';
  do {
    digits[--at] = static_cast<char>('0' + error % 10);
    error /= 10;
  } while (error > 0 && at > 0);
  (void)!write(STDERR_FILENO, digits + at, sizeof digits - at);
}

}  // namespace

std::optional<std::string> resolve_program(const std::string& program, std::string& why) {
  auto executable = [](const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           access(path.c_str(), X_OK) == 0;
  };
  if (program.empty()) {
    why = "the command is an empty word";
    return std::nullopt;
  }
  if (program.find('/') != std::string::npos) {
    struct stat info {};
    if (stat(program.c_str(), &info) != 0) {
      why = std::strerror(errno);
    } else if (!S_ISREG(info.st_mode)) {
      why = "not a regular file";
    } else if (access(program.c_str(), X_OK) != 0) {
      why = "not executable";
    } else {
      return program;
    }
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  why = "no such executable on PATH";
  return std::nullopt;
}

void make_child_image(const LaunchOptions& options, const std::string& program, int port,
                      int local_rank, const std::vector<int>& cores, int notice_fd,
                      const std::string& notice_value, ChildImage& image) {
  const int world = options.nproc_per_node * options.nnodes;
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},
      {kBindCoresVariable, cores.empty() ? "0" : "1"}};
  if (std::getenv("OMP_NUM_THREADS") == nullptr && options.nproc_per_node > 1 && cores.empty()) {
    set.emplace_back("OMP_NUM_THREADS", "1");
  }
  // Always replaced: an outer launch's value names a descriptor this launch's processes lack.
  set.emplace_back(kNoticeFdVariable, notice_value);
  image.program = program;
  image.words = options.command;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    const bool replaced =
        name == "TORCHELASTIC_USE_AGENT_STORE" ||
        std::any_of(set.begin(), set.end(), [&name](const auto& kv) { return kv.first == name; });
    if (!replaced) image.environment.push_back(text);
  }
  for (const auto& [name, value] : set) image.environment.push_back(name + "=" + value);
  for (std::string& word : image.words) image.argv.push_back(word.data());
  image.argv.push_back(nullptr);
  for (std::string& entry : image.environment) image.envp.push_back(entry.data());
  image.envp.push_back(nullptr);
  image.exec_failed =
      fmt::format("{}: cannot run '{}': errno ", options.log_prefix, options.command[0]);
  image.notice_fd = notice_fd;
  image.bind = !cores.empty();
  CPU_ZERO(&image.cores);
  for (const int cpu : cores) CPU_SET(cpu, &image.cores);
  image.bind_failed = fmt::format("{}: cannot pin local rank {} to cores {}: errno ",
                                  options.log_prefix, local_rank, fmt::join(cores, ","));
}

[[noreturn]] void run_child(const ChildImage& image, bool discard_stdout, int stderr_fd,
                            pid_t launcher, const sigset_t& mask) {
  // Die with the launcher (no orphans), even if it dies before this line runs.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(137);
  // A process group of its own, which the launcher stops whole: what the command starts in
  // turn (a shell's children, a profiler's target) goes with it.
  setpgid(0, 0);
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  for (const int caught : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXCPU, SIGTSTP}) {
    struct sigaction current {};
    action.sa_handler = SIG_DFL;
    if (sigaction(caught, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) {
      sigaction(caught, &action, nullptr);
    }
  }
  pipebal::restore_ignored_signals_for_exec();
  // In its own group it is in the terminal's background, where a read (or, under `stty tostop`,
  // a write) would stop it for good: ignored, the signals let the write through and make the
  // read an error (launch() names a process stopped so nevertheless).
  action.sa_handler = SIG_IGN;
  sigaction(SIGTTOU, &action, nullptr);
  sigaction(SIGTTIN, &action, nullptr);
  if (discard_stdout) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0 && null != STDOUT_FILENO) {
      dup2(null, STDOUT_FILENO);
      close(null);
    }
  }
  if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);  // the launcher's relay (not closed on exec)
  if (image.notice_fd >= 0) fcntl(image.notice_fd, F_SETFD, 0);
  if (image.bind && sched_setaffinity(0, sizeof image.cores, &image.cores) != 0) {
    const int error = errno;
    (void)!write(STDERR_FILENO, image.bind_failed.data(), image.bind_failed.size());
    write_errno_line(error);
    _exit(127);
  }
  sigprocmask(SIG_SETMASK, &mask, nullptr);  // now what comes acts as it would in the command
  execve(image.program.c_str(), image.argv.data(), image.envp.data());
  const int error = errno;
  (void)!write(STDERR_FILENO, image.exec_failed.data(), image.exec_failed.size());
  write_errno_line(error);
  _exit(127);
}

}  // namespace pipebal::distributed
