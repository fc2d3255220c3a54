// The launcher's folding of the processes' stderr lines, on given times: a line several ranks
// print alike within the window is shown once, naming them; each rank's lines keep their order;
// nothing is held past its window; the launcher's own lines come after what led to them.
#include "pipebal/distributed/line_folding.h"

#include <gtest/gtest.h>

namespace {

using pipebal::distributed::LineFolder;
using pipebal::distributed::ranks_label;
using std::chrono::milliseconds;

const LineFolder::Clock::time_point kStart{};
const milliseconds kWindow{500};

TEST(LineFolding, TheSameErrorFromEveryRankIsShownOnceNamingThemAll) {
  LineFolder folder(kWindow);
  const int arrivals[] = {2, 0, 3, 1};
  for (int i = 0; i < 4; ++i) {
    folder.add(arrivals[i],
               "pipebal: error: rank " + std::to_string(arrivals[i]) + ": cannot read data.bin",
               kStart + milliseconds(10 * i));
  }
  EXPECT_EQ(folder.take_due(kStart + kWindow - milliseconds(1)), "") << "held for the window";
  EXPECT_EQ(folder.take_due(kStart + kWindow), "pipebal: error: ranks 0-3: cannot read data.bin\n");
  EXPECT_EQ(folder.next_due(), LineFolder::Clock::time_point::max());
}

TEST(LineFolding, LinesThatNameNoRankAreShownOnceAsPrinted) {
  LineFolder folder(kWindow);
  folder.add(0, "[W Module.cpp] a warning", kStart);
  folder.add(1, "[W Module.cpp] a warning", kStart);
  folder.add(1, "rank 1 only", kStart);
  EXPECT_EQ(folder.take_all(), "[W Module.cpp] a warning\nrank 1 only\n");
}

TEST(LineFolding, LinesThatDifferOrComeAfterTheWindowAreEachShown) {
  LineFolder folder(kWindow);
  folder.add(0, "pipebal: error: rank 0: the data has 10 rows", kStart);
  folder.add(1, "pipebal: error: rank 1: the data has 12 rows", kStart);
  EXPECT_EQ(folder.take_due(kStart + kWindow),
            "pipebal: error: rank 0: the data has 10 rows\n"
            "pipebal: error: rank 1: the data has 12 rows\n");
  folder.add(0, "x", kStart + kWindow);
  EXPECT_EQ(folder.take_due(kStart + 2 * kWindow), "x\n");
  folder.add(1, "x", kStart + 2 * kWindow);  // the first one was shown already
  EXPECT_EQ(folder.take_all(), "x\n");
}

TEST(LineFolding, ARankNamedOnlyAsAWordOfItsOwnIsFolded) {
  LineFolder folder(kWindow);
  // "rank 1: " inside "rank 11: " or "frank 1: " is not rank 1 naming itself.
  folder.add(1, "rank 11: frank 1: a", kStart);
  folder.add(2, "rank 11: frank 1: a", kStart);
  folder.add(11, "w: rank 11: b", kStart);
  folder.add(1, "w: rank 1: b", kStart);
  EXPECT_EQ(folder.take_all(), "rank 11: frank 1: a\nw: ranks 1, 11: b\n");
}

TEST(LineFolding, EachRanksLinesKeepTheirOrder) {
  LineFolder folder(kWindow);
  folder.add(0, "a", kStart);
  folder.add(0, "b", kStart);
  folder.add(1, "b", kStart);  // joins rank 0's "b"
  folder.add(1, "a", kStart);  // must not join "a", before rank 1's "b": shown after it
  folder.add(0, "a", kStart);  // rank 0 again: joins rank 1's "a", after its own "b"
  folder.add(1, "b", kStart);  // a second "b" of rank 1's: not into the first
  EXPECT_EQ(folder.take_all(), "a\nb\na\nb\n");
}

TEST(LineFolding, TheLaunchersLinesComeInTurnAndAreNeverJoined) {
  LineFolder folder(kWindow);
  folder.add(0, "pipebal: error: rank 0: bad input", kStart);
  folder.add(LineFolder::kLauncher, "pipebal launch: rank 0 exited with status 2", kStart);
  // Rank 1's copy, printed after the launcher's line, still joins rank 0's.
  folder.add(1, "pipebal: error: rank 1: bad input", kStart + milliseconds(100));
  folder.add(LineFolder::kLauncher, "pipebal launch: rank 0 exited with status 2", kStart);
  EXPECT_EQ(folder.take_all(),
            "pipebal: error: ranks 0, 1: bad input\n"
            "pipebal launch: rank 0 exited with status 2\n"
            "pipebal launch: rank 0 exited with status 2\n");
}

TEST(LineFolding, LinesAreShownInOrderAsTheirWindowsPass) {
  LineFolder folder(kWindow);
  folder.add(0, "first", kStart);
  folder.add(1, "second", kStart + milliseconds(300));
  EXPECT_EQ(folder.next_due(), kStart + kWindow);
  EXPECT_EQ(folder.take_due(kStart + kWindow), "first\n");
  EXPECT_EQ(folder.next_due(), kStart + milliseconds(300) + kWindow);
  EXPECT_EQ(folder.take_due(kStart + milliseconds(300) + kWindow), "second\n");
}

TEST(LineFolding, RanksAreListedWithRunsAsRanges) {
  EXPECT_EQ(ranks_label({4}), "rank 4: ");
  EXPECT_EQ(ranks_label({1, 0}), "ranks 0, 1: ");
  EXPECT_EQ(ranks_label({3, 0, 1, 2}), "ranks 0-3: ");
  EXPECT_EQ(ranks_label({0, 2, 3, 4, 7, 8}), "ranks 0, 2-4, 7, 8: ");
}

}  // namespace
