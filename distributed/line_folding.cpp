// See line_folding.h.
#include "pipebal/distributed/line_folding.h"

#include <algorithm>

#include <fmt/format.h>

namespace pipebal::distributed {

LineFolder::LineFolder(Clock::duration window) : window_(window) {}

void LineFolder::add(int rank, const std::string& line, Clock::time_point now) {
  Held entry;
  entry.ranks = {rank};
  entry.due = now + window_;
  entry.before = line;
  entry.key = line;
  if (rank != kLauncher) {
    // The rank as the commands' errors and warnings name their own (tools::rank_prefix), as a
    // word of its own: "rank 1: " is not found in "rank 11: " or "frank 1: ".
    const std::string token = fmt::format("rank {}: ", rank);
    for (size_t at = line.find(token); at != std::string::npos; at = line.find(token, at + 1)) {
      if (at > 0 && line[at - 1] != ' ') continue;
      entry.names_rank = true;
      entry.before = line.substr(0, at);
      entry.after = line.substr(at + token.size());
      entry.key = entry.before + '\n' + entry.after;  // no line holds a newline
      break;
    }
    // Joins the latest line held alike that this rank has not printed, unless it came before one
    // this rank printed (which would then be shown after it).
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
      if (std::find(it->ranks.begin(), it->ranks.end(), rank) != it->ranks.end()) break;
      if (it->ranks.front() != kLauncher && it->key == entry.key &&
          it->names_rank == entry.names_rank) {
        it->ranks.push_back(rank);
        return;
      }
    }
  }
  held_.push_back(std::move(entry));
}

std::string LineFolder::take_due(Clock::time_point now) {
  // Held in order of arrival, so the ones due come first.
  std::string text;
  auto first_not_due = held_.begin();
  while (first_not_due != held_.end() && first_not_due->due <= now) {
    text += shown(*first_not_due) + '\n';
    ++first_not_due;
  }
  held_.erase(held_.begin(), first_not_due);
  return text;
}

std::string LineFolder::take_all() {
  return take_due(Clock::time_point::max());
}

LineFolder::Clock::time_point LineFolder::next_due() const {
  return held_.empty() ? Clock::time_point::max() : held_.front().due;
}

std::string LineFolder::shown(const Held& held) {
  if (!held.names_rank) return held.before;
  return held.before + ranks_label(held.ranks) + held.after;
}

std::string ranks_label(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.size() == 1) return fmt::format("rank {}: ", ranks.front());
  std::string text = "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i + 1;  // one past the run of consecutive ranks from i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (i > 0) text += ", ";
    if (end - i >= 3) {
      text += fmt::format("{}-{}", ranks[i], ranks[end - 1]);
    } else {
      text += std::to_string(ranks[i]);
      if (end - i == 2) text += fmt::format(", {}", ranks[i + 1]);
    }
    i = end;
  }
  return text + ": ";
}

}  // namespace pipebal::distributed
