// See peer_failure_notice.h.
#include "pipebal/distributed/peer_failure_notice.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "pipebal/common/parse_integers.h"
#include "pipebal/distributed/relay_pipe.h"

namespace pipebal::distributed {

PeerFailureNotices::PeerFailureNotices() {
  const RelayPipe pipe = open_relay_pipe();
  if (pipe.write_fd < 0) return;
  read_fd_ = pipe.read_fd;
  write_fd_ = pipe.write_fd;
  struct stat info {};
  if (fstat(write_fd_, &info) == 0) value_ = fmt::format("{}:{}", write_fd_, info.st_ino);
}

PeerFailureNotices::~PeerFailureNotices() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
}

void PeerFailureNotices::read_notices() {
  char buffer[512];
  while (read_fd_ >= 0) {
    const ssize_t got = read(read_fd_, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // all read (EAGAIN)
    unread_.append(buffer, static_cast<size_t>(got));
    for (size_t end; (end = unread_.find('\n')) != std::string::npos;) {
      // "RANK" or "RANK FAILED_RANK"; anything else is not a notice.
      const std::string line = unread_.substr(0, end);
      unread_.erase(0, end + 1);
      const size_t blank = line.find(' ');
      const auto in_range = [](const std::optional<int64_t>& n) {
        return n && *n >= 0 && *n <= std::numeric_limits<int>::max();
      };
      const std::optional<int64_t> rank = parse_integer(line.substr(0, blank));
      if (!in_range(rank)) continue;
      int failed = -1;
      if (blank != std::string::npos) {
        const std::optional<int64_t> named = parse_integer(line.substr(blank + 1));
        if (!in_range(named)) continue;
        failed = static_cast<int>(*named);
      }
      failed_[static_cast<int>(*rank)] = failed;
    }
  }
}

bool PeerFailureNotices::noticed(int rank) {
  read_notices();
  return failed_.count(rank) > 0;
}

int PeerFailureNotices::failed_rank(int rank) {
  read_notices();
  const auto notice = failed_.find(rank);
  return notice == failed_.end() ? -1 : notice->second;
}

void notify_launcher_of_peer_failure(int failed_rank) noexcept {
  const char* value = std::getenv(kNoticeFdVariable);
  const char* rank_text = std::getenv("RANK");
  if (value == nullptr || rank_text == nullptr) return;
  // Written as a number: a RANK of other text could read as another notice.
  char* end = nullptr;
  errno = 0;
  const long long rank = std::strtoll(rank_text, &end, 10);
  if (!std::isdigit(static_cast<unsigned char>(rank_text[0])) || *end != '\0' || errno != 0 ||
      rank > std::numeric_limits<int>::max()) {
    return;
  }
  long long fd = -1;
  unsigned long long inode = 0;
  int length = 0;
  if (std::sscanf(value, "%lld:%llu%n", &fd, &inode, &length) != 2 || value[length] != '\0' ||
      fd <= STDERR_FILENO || fd > std::numeric_limits<int>::max()) {
    return;
  }
  struct stat info {};
  if (fstat(static_cast<int>(fd), &info) != 0 || !S_ISFIFO(info.st_mode) || info.st_ino != inode) {
    return;  // not the launcher's pipe any more
  }
  char line[48];  // shorter than PIPE_BUF: written in one piece
  const int size = failed_rank >= 0
                       ? std::snprintf(line, sizeof line, "%lld %d\n", rank, failed_rank)
                       : std::snprintf(line, sizeof line, "%lld\n", rank);
  if (size <= 0 || size_t(size) >= sizeof line) return;
  // The launcher gone, its pipe has no reader: the write fails with EPIPE, and the SIGPIPE it
  // raises on this thread is taken here, not left to end the process.
  sigset_t pipe_signal, before;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &before);
  ssize_t written = 0;
  while ((written = write(static_cast<int>(fd), line, size_t(size))) < 0 && errno == EINTR) {
  }
  if (written < 0 && errno == EPIPE) {
    const timespec now{0, 0};
    sigtimedwait(&pipe_signal, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace pipebal::distributed
