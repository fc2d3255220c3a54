// The launcher's relay of its processes' stderr, through real pipes written here as the
// processes would: whole lines folded across ranks, a line left unfinished shown once its window
// passed, one longer than a pipe shown in pieces, what is left shown at the end, and with no window
// no pipes at all. (The processes themselves: LaunchCli.TheSameLineFromSeveralRanksIsShownOnce...)
#include "pipebal/distributed/stderr_relay.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

using pipebal::distributed::StderrRelay;
using std::chrono::milliseconds;

constexpr milliseconds kWindow{50};

void write_all(int fd, const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    ASSERT_GT(n, 0);
    at += static_cast<size_t>(n);
  }
}

// Pumps until `out` holds `lines` lines (or a generous deadline passes).
void pump_until(StderrRelay& relay, const std::ostringstream& out, int lines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = out.str();
    if (std::count(text.begin(), text.end(), '\n') >= lines) return;
    relay.pump(milliseconds(10));
  }
}

TEST(StderrRelay, WholeLinesFromSeveralRanksAreFoldedAndTheLaunchersComeAfter) {
  std::ostringstream out;
  StderrRelay relay(2, 4, kWindow, out);  // ranks 4 and 5 on this node
  write_all(relay.write_end(0), "pipebal: error: rank 4: bad input\nonly 4\n");
  write_all(relay.write_end(1), "pipebal: error: rank 5: bad input\n");
  relay.pump(milliseconds(0));  // read before the launcher speaks, as after a process ended
  relay.say("pipebal launch: rank 4 exited with status 2");
  pump_until(relay, out, 3);
  EXPECT_EQ(out.str(),
            "pipebal: error: ranks 4, 5: bad input\nonly 4\n"
            "pipebal launch: rank 4 exited with status 2\n");
}

TEST(StderrRelay, AnUnfinishedLineIsShownOnceItsWindowPassed) {
  std::ostringstream out;
  StderrRelay relay(1, 0, kWindow, out);
  write_all(relay.write_end(0), "a prompt: ");
  pump_until(relay, out, 1);
  EXPECT_EQ(out.str(), "a prompt: \n");
}

TEST(StderrRelay, ALineLongerThanAPipeIsShownInPieces) {
  std::ostringstream out;
  StderrRelay relay(1, 0, kWindow, out);
  const std::string line(200 * 1024, 'x');
  std::thread writer([&relay, &line] { write_all(relay.write_end(0), line + "\n"); });
  pump_until(relay, out, 2);
  writer.join();
  relay.close_write_ends();
  relay.finish();
  std::string shown = out.str();
  EXPECT_GE(std::count(shown.begin(), shown.end(), '\n'), 2);
  shown.erase(std::remove(shown.begin(), shown.end(), '\n'), shown.end());
  EXPECT_EQ(shown, line) << "every byte, in order";
}

TEST(StderrRelay, WhatIsLeftIsShownAtTheEnd) {
  std::ostringstream out;
  StderrRelay relay(2, 0, std::chrono::seconds(30), out);  // nothing falls due meanwhile
  write_all(relay.write_end(0), "last words\nno newline");
  write_all(relay.write_end(1), "last words\n");
  relay.close_write_ends();
  relay.drain(0);
  relay.finish();
  EXPECT_EQ(out.str(), "last words\nno newline\n");
}

TEST(StderrRelay, WithoutAWindowTheProcessesKeepTheLaunchersStderr) {
  std::ostringstream out;
  StderrRelay relay(2, 0, milliseconds(0), out);
  EXPECT_EQ(relay.write_end(0), -1);
  EXPECT_EQ(relay.write_end(1), -1);
  relay.say("pipebal launch: said at once");
  EXPECT_EQ(out.str(), "pipebal launch: said at once\n");
}

}  // namespace
