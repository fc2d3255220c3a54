// The lines the processes of one launch print on standard error, shown once when several print
// the same: every rank that reads a bad input says so, and N ranks would print N copies of one
// error. A line is held for a short window; the same line from another rank within it joins it,
// and a rank named in the line ("pipebal: error: rank 1: ...") becomes the ranks that printed it
// ("pipebal: error: ranks 0-3: ..."). Each rank's lines keep their order. This is the
// bookkeeping, with the time given, so that it can be tested without waiting. Torch-free.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pipebal::distributed {

class LineFolder {
 public:
  using Clock = std::chrono::steady_clock;

  // The source of a line the launcher itself writes: never joined with another, but held in
  // turn, so that it comes after the processes' lines that led to it.
  static constexpr int kLauncher = -1;

  explicit LineFolder(Clock::duration window);

  // A whole line, without its newline, from process `rank` (or kLauncher), arrived at `now`.
  void add(int rank, const std::string& line, Clock::time_point now);

  // The lines whose window has passed at `now`, each with its newline, in the order to show.
  std::string take_due(Clock::time_point now);

  // Every line held, due or not (the processes are gone).
  std::string take_all();

  // When the first line held falls due; Clock::time_point::max() when none is held.
  Clock::time_point next_due() const;

 private:
  struct Held {
    std::string key;     // the line with the rank that printed it left out
    std::string before;  // the line before "rank R: ", or all of it when it names none
    std::string after;   // the line after "rank R: "
    bool names_rank = false;
    std::vector<int> ranks;  // the ranks that printed it, in order of arrival
    Clock::time_point due;
  };

  static std::string shown(const Held& held);

  Clock::duration window_;
  std::vector<Held> held_;  // in order of arrival of each one's first line
};

// "rank 3: ", or for several "ranks 0-3: ", "ranks 0, 2: " (runs of three or more as ranges).
std::string ranks_label(std::vector<int> ranks);

}  // namespace pipebal::distributed
