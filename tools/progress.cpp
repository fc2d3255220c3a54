// See progress.h.
#include "tools/progress.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

namespace pipebal::tools {
namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::string format_seconds(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const long whole = std::lround(seconds);
  return fmt::format("{} min {:02} s", whole / 60, whole % 60);
}

Progress::Mode Progress::mode_for_stderr(bool quiet) {
  if (quiet) return Mode::kQuiet;
  return ::isatty(STDERR_FILENO) != 0 ? Mode::kLive : Mode::kLines;
}

Progress::Progress(std::ostream& out, Mode mode, Clock::duration silent_for)
    : out_(out), mode_(mode), silent_for_(silent_for) {}

Progress::~Progress() {
  finish();
}

void Progress::update(const std::string& phase, size_t done, size_t total,
                      const std::string& detail) {
  if (mode_ == Mode::kQuiet) return;
  const Clock::time_point now = Clock::now();
  if (phase != phase_) {
    phase_ = phase;
    phase_start_ = now;
    last_line_ = Clock::time_point{};
  }
  if (now - start_ < silent_for_) return;
  const bool phase_done = done >= total;
  if (mode_ == Mode::kLines && !phase_done && done > 1 && seconds_between(last_line_, now) < 1.0) {
    return;
  }
  last_line_ = now;
  std::string text = fmt::format("{} {} of {}", phase, done, total);
  if (!detail.empty()) text += " (" + detail + ")";
  text += fmt::format(", elapsed {}", format_seconds(seconds_between(start_, now)));
  if (!phase_done && done > 0) {
    const double per_unit = seconds_between(phase_start_, now) / double(done);
    text += fmt::format(", about {} left in this phase",
                        format_seconds(per_unit * double(total - done)));
  }
  if (mode_ == Mode::kLive) {
    out_ << "\r\033[K" << text << std::flush;  // \033[K clears the rest of the line
    live_line_open_ = true;
  } else {
    out_ << text << "\n" << std::flush;
  }
}

void Progress::finish() {
  if (live_line_open_) out_ << "\n" << std::flush;
  live_line_open_ = false;
}

}  // namespace pipebal::tools
