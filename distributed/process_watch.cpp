// See process_watch.h.
#include "pipebal/distributed/process_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace pipebal::distributed {
namespace {

// /proc/PID/stat's fields from the third (the state) on, of process `pid` ("self" for this
// one); none when it cannot be read.
std::vector<std::string> stat_fields(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t name_end = text.rfind(')');  // the command name may hold spaces
  if (name_end == std::string::npos || name_end + 2 > text.size()) return {};
  std::istringstream words(text.substr(name_end + 2));
  std::vector<std::string> fields;
  for (std::string field; words >> field;) fields.push_back(field);
  return fields;
}

// When process `pid` started, in clock ticks since boot (the 22nd field); "" when it cannot be
// read.
std::string start_time(const std::string& pid) {
  const std::vector<std::string> fields = stat_fields(pid);
  return fields.size() > 19 ? fields[19] : "";
}

}  // namespace

std::string process_identity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::error_code error;
  const std::string pid_namespace = std::filesystem::read_symlink("/proc/self/ns/pid", error);
  const std::string started = start_time("self");
  if (!(boot >> boot_id) || error || started.empty()) return "";
  return fmt::format("{} {} {} {}", boot_id, pid_namespace, ::getpid(), started);
}

std::optional<int> watch_process(const std::string& identity) {
  std::istringstream mine(process_identity()), theirs(identity);
  std::string boot, pid_namespace, their_boot, their_namespace, started;
  long pid = 0;
  if (!(mine >> boot >> pid_namespace) ||
      !(theirs >> their_boot >> their_namespace >> pid >> started) || their_boot != boot ||
      their_namespace != pid_namespace || pid <= 0) {
    return std::nullopt;
  }
  const int handle = process_handle(static_cast<pid_t>(pid));
  // Checked once the handle is open: the pid cannot then be reused under it.
  if (start_time(std::to_string(pid)) != started) {
    close_process_handle(handle);
    return std::nullopt;
  }
  return handle;
}

int process_handle(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) return static_cast<int>(fd);
#endif
  return -static_cast<int>(pid);
}

bool process_ended(int handle) {
  if (handle < 0) {
    // Without a pidfd: gone, or a zombie its parent has not reaped (`pipebal launch` keeps its
    // ended processes so until the launch ends), which signals still reach.
    const pid_t pid = static_cast<pid_t>(-handle);
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    const std::vector<std::string> fields = stat_fields(std::to_string(pid));
    return fields.empty() || fields[0] == "Z";
  }
  pollfd ended{handle, POLLIN, 0};
  return ::poll(&ended, 1, 0) > 0;
}

void close_process_handle(int handle) {
  if (handle >= 0) ::close(handle);
}

}  // namespace pipebal::distributed
