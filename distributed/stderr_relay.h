// The standard error of the processes a launch starts, carried to the launcher's own through one
// pipe each and shown line by line, a line that several print alike once (LineFolder). With no
// window the processes write to the launcher's standard error themselves, as they started.
// Torch-free.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "pipebal/distributed/line_folding.h"

namespace pipebal::distributed {

class StderrRelay {
 public:
  // Pipes for `processes` processes, the first of rank `first_rank`; none when `window` is zero
  // or this process has no descriptors left for them (the processes then write unfolded).
  StderrRelay(int processes, int first_rank, LineFolder::Clock::duration window, std::ostream& out);
  ~StderrRelay();
  StderrRelay(const StderrRelay&) = delete;
  StderrRelay& operator=(const StderrRelay&) = delete;

  // The descriptor process `process` (0-based on this host) is to write its standard error to,
  // closed on exec; -1 when it keeps the launcher's.
  int write_end(int process) const;

  // The launcher's part once every process has started: it writes to none of the pipes.
  void close_write_ends();

  // A line of the launcher's own, shown after what the processes printed before it.
  void say(const std::string& line);

  // Waits up to `wait` for output, reads what came and shows the lines that are due.
  void pump(std::chrono::milliseconds wait);

  // Reads what process `process` left in its pipe (it has ended; what it started may still
  // write).
  void drain(int process);

  // Shows everything read and held: the processes are gone. What they started and left running
  // may still write; that is not waited for.
  void finish();

 private:
  struct Source {
    int read_fd = -1;
    int write_fd = -1;
    std::string partial;  // read, not yet a whole line
    LineFolder::Clock::time_point partial_since;
  };

  bool relaying() const { return !sources_.empty(); }
  void close_all();
  // Reads what the pipe holds now (a megabyte at most, more than a pipe holds), and closes it at
  // its end.
  void read_available(int process);
  void show_due(LineFolder::Clock::time_point now);

  int first_rank_;
  LineFolder::Clock::duration window_;
  std::ostream& out_;
  LineFolder folder_;
  std::vector<Source> sources_;
  bool finished_ = false;
};

}  // namespace pipebal::distributed
