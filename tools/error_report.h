// How the command line ends on an exception: one line on stderr and an exit status that tells a
// user error (2: bad input, or a model or run that failed) from a bug in pipebal (70, as
// sysexits' EX_SOFTWARE: an internal invariant broke, which no input should cause).
#pragma once

#include <cstddef>
#include <exception>
#include <string>

namespace pipebal::tools {

constexpr int kUserErrorStatus = 2;
constexpr int kInternalErrorStatus = 70;

struct ErrorReport {
  std::string line;  // without the newline
  int status = kUserErrorStatus;
};

// The cause of an exception in one line, e.g. pipeline::error_summary for LibTorch's errors.
using Summarize = std::string (*)(const std::exception&);

// `prefix` goes before the message (e.g. "rank 1: " in a multi-process run). std::logic_error
// other than std::invalid_argument (what pipebal throws for bad input) is an internal error.
// `summarize` null: summarize_error_text of what() (common/error_text.h).
ErrorReport report_error(const std::exception& error, const std::string& prefix = "",
                         Summarize summarize = nullptr);

// An error line longer than this is shortened in its middle (common/error_text.h): one that
// echoes a 100 KB model name says so in a few lines of a terminal.
constexpr size_t kMostErrorLineBytes = 2000;

// Writes `line`, its control characters escaped (common/error_text.h's printable) and shortened
// past kMostErrorLineBytes, and a newline to stderr in one write: lines of processes sharing the
// terminal (the ranks of a launch) do not interleave mid-line.
void print_error_line(const std::string& line);

}  // namespace pipebal::tools
