// See stderr_relay.h.
#include "pipebal/distributed/stderr_relay.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "pipebal/distributed/relay_pipe.h"

namespace pipebal::distributed {
namespace {

// A line longer than this is shown in pieces rather than held whole.
constexpr size_t kLongestLine = 64 * 1024;

}  // namespace

StderrRelay::StderrRelay(int processes, int first_rank, LineFolder::Clock::duration window,
                         std::ostream& out)
    : first_rank_(first_rank), window_(window), out_(out), folder_(window) {
  if (window <= LineFolder::Clock::duration::zero()) return;
  sources_.resize(processes);
  for (Source& source : sources_) {
    const RelayPipe pipe = open_relay_pipe();
    if (pipe.write_fd < 0) {
      // Out of descriptors (hundreds of processes): they keep the launcher's stderr, unfolded.
      close_all();
      sources_.clear();
      return;
    }
    source.read_fd = pipe.read_fd;
    source.write_fd = pipe.write_fd;
  }
}

void StderrRelay::close_all() {
  for (Source& source : sources_) {
    if (source.read_fd >= 0) close(source.read_fd);
    if (source.write_fd >= 0) close(source.write_fd);
    source.read_fd = source.write_fd = -1;
  }
}

StderrRelay::~StderrRelay() {
  // Left early (an exception in the launcher): what was read is still shown.
  try {
    finish();
  } catch (...) {
  }
  close_all();
}

int StderrRelay::write_end(int process) const {
  return relaying() ? sources_[process].write_fd : -1;
}

void StderrRelay::close_write_ends() {
  for (Source& source : sources_) {
    if (source.write_fd >= 0) close(source.write_fd);
    source.write_fd = -1;
  }
}

void StderrRelay::say(const std::string& line) {
  if (!relaying()) {
    out_ << line << '\n' << std::flush;
    return;
  }
  folder_.add(LineFolder::kLauncher, line, LineFolder::Clock::now());
}

void StderrRelay::read_available(int process) {
  Source& source = sources_[process];
  if (source.read_fd < 0) return;
  const int rank = first_rank_ + process;
  char buffer[16 * 1024];
  // At most a megabyte a call: a process writing without pause must not keep the launcher from
  // its other duties (signals, the other processes).
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = read(source.read_fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: all read for now
    const auto now = LineFolder::Clock::now();
    if (n == 0) {
      close(source.read_fd);
      source.read_fd = -1;
      if (!source.partial.empty()) folder_.add(rank, source.partial, now);
      source.partial.clear();
      return;
    }
    if (source.partial.empty()) source.partial_since = now;
    source.partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end; (end = source.partial.find('\n', start)) != std::string::npos;
         start = end + 1) {
      folder_.add(rank, source.partial.substr(start, end - start), now);
    }
    source.partial.erase(0, start);
    if (start > 0) source.partial_since = now;
    if (source.partial.size() > kLongestLine) {
      folder_.add(rank, source.partial, now);
      source.partial.clear();
    }
  }
}

void StderrRelay::show_due(LineFolder::Clock::time_point now) {
  // A line left unfinished for a window (a prompt, a line printed in pieces) is shown as it is.
  for (size_t process = 0; process < sources_.size(); ++process) {
    Source& source = sources_[process];
    if (!source.partial.empty() && now - source.partial_since >= window_) {
      folder_.add(first_rank_ + static_cast<int>(process), source.partial, now);
      source.partial.clear();
    }
  }
  const std::string text = folder_.take_due(now);
  if (!text.empty()) out_ << text << std::flush;
}

void StderrRelay::pump(std::chrono::milliseconds wait) {
  if (!relaying()) {
    std::this_thread::sleep_for(wait);
    return;
  }
  std::vector<pollfd> fds;
  std::vector<int> processes;
  for (size_t process = 0; process < sources_.size(); ++process) {
    if (sources_[process].read_fd < 0) continue;
    fds.push_back({sources_[process].read_fd, POLLIN, 0});
    processes.push_back(static_cast<int>(process));
  }
  // Not past the next line due: it is shown on time.
  const auto until_due = folder_.next_due() - LineFolder::Clock::now();
  if (until_due < wait) {
    // Rounded up: a line due in under a millisecond is not polled for at 0 ms again and again.
    wait = std::max(std::chrono::milliseconds(0),
                    std::chrono::ceil<std::chrono::milliseconds>(until_due));
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(wait);
  } else if (poll(fds.data(), fds.size(), static_cast<int>(wait.count())) > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_available(processes[i]);
    }
  }
  show_due(LineFolder::Clock::now());
}

void StderrRelay::drain(int process) {
  if (relaying()) read_available(process);
}

void StderrRelay::finish() {
  if (!relaying() || finished_) return;
  finished_ = true;
  for (size_t process = 0; process < sources_.size(); ++process) {
    read_available(static_cast<int>(process));
    Source& source = sources_[process];
    if (!source.partial.empty()) {
      folder_.add(first_rank_ + static_cast<int>(process), source.partial,
                  LineFolder::Clock::now());
      source.partial.clear();
    }
  }
  const std::string text = folder_.take_all();
  if (!text.empty()) out_ << text << std::flush;
}

}  // namespace pipebal::distributed
