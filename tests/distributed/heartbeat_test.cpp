// The heartbeat's bookkeeping, on given times: beats every period, a ring of watches, and a
// watched rank named silent only once its count has stood still for longer than the limit.
#include "pipebal/distributed/heartbeat.h"

#include <set>

#include <gtest/gtest.h>

namespace {

using pipebal::distributed::Heartbeat;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Heartbeat::Clock::time_point kStart{};

TEST(Heartbeat, EveryRankIsWatchedByExactlyOneOther) {
  for (int world : {2, 3, 8}) {
    std::set<int> watched;
    for (int r = 0; r < world; ++r) {
      const Heartbeat beat(r, world, seconds(5), kStart);
      ASSERT_TRUE(beat.watched().has_value());
      EXPECT_NE(*beat.watched(), r);
      watched.insert(*beat.watched());
    }
    EXPECT_EQ(static_cast<int>(watched.size()), world);
  }
  EXPECT_FALSE(Heartbeat(0, 1, seconds(5), kStart).watched().has_value()) << "alone";
}

TEST(Heartbeat, BeatsAtOnceThenOncePerPeriod) {
  Heartbeat beat(0, 2, seconds(5), kStart);
  EXPECT_TRUE(beat.beat_due(kStart));
  EXPECT_FALSE(beat.beat_due(kStart + Heartbeat::kPeriod - milliseconds(1)));
  EXPECT_TRUE(beat.beat_due(kStart + Heartbeat::kPeriod));
  EXPECT_FALSE(beat.beat_due(kStart + Heartbeat::kPeriod + milliseconds(100)));
  EXPECT_TRUE(beat.beat_due(kStart + 3 * Heartbeat::kPeriod));
}

TEST(Heartbeat, AWatchedRankIsSilentOnlyAfterItsCountStoodStillForTheLimit) {
  Heartbeat beat(0, 2, seconds(5), kStart);
  EXPECT_FALSE(beat.silent(0, kStart));  // the first reading starts the clock
  EXPECT_FALSE(beat.silent(0, kStart + seconds(5)));
  EXPECT_TRUE(beat.silent(0, kStart + seconds(5) + milliseconds(1)));
  EXPECT_EQ(beat.limit(), seconds(5));
  // A count that moves again restarts the clock.
  EXPECT_FALSE(beat.silent(1, kStart + seconds(7)));
  EXPECT_FALSE(beat.silent(1, kStart + seconds(11)));
  EXPECT_TRUE(beat.silent(1, kStart + seconds(13)));
}

// Ctrl-Z stops every rank, and fg wakes them one by one: a watcher woken before the rank it
// watches finds its count unmoved over the whole stop, which says nothing of that rank. Its
// silence is counted from the watcher's own waking.
TEST(Heartbeat, AWatcherThatWasStoppedItselfCountsSilenceFromItsWaking) {
  Heartbeat beat(0, 2, seconds(5), kStart);
  ASSERT_TRUE(beat.beat_due(kStart));
  EXPECT_FALSE(beat.silent(7, kStart));
  const auto woken = kStart + seconds(100);  // stopped for 100 s
  ASSERT_TRUE(beat.beat_due(woken));
  EXPECT_FALSE(beat.silent(7, woken));
  EXPECT_FALSE(beat.silent(7, woken + seconds(5)));
  EXPECT_TRUE(beat.silent(7, woken + seconds(5) + milliseconds(1)));  // and then it is silent
  // Beats a period apart, or a little late, are no stop: the silence goes on counting.
  Heartbeat busy(0, 2, seconds(5), kStart);
  for (int t = 0; t <= 6; ++t) {
    const auto now = kStart + t * Heartbeat::kStalled;
    ASSERT_TRUE(busy.beat_due(now));
    EXPECT_EQ(busy.silent(7, now), now - kStart > seconds(5)) << t;
  }
}

TEST(Heartbeat, AWatchedRankThatKeepsBeatingIsNeverSilent) {
  Heartbeat beat(2, 3, seconds(5), kStart);
  for (int t = 0; t < 100; ++t) EXPECT_FALSE(beat.silent(t, kStart + seconds(4 * t)));
}

TEST(Heartbeat, TheSilenceLimitIsHalfTheTimeoutFromFiveToSixtySeconds) {
  EXPECT_EQ(Heartbeat::silence_limit(seconds(3)), seconds(5));
  EXPECT_EQ(Heartbeat::silence_limit(seconds(20)), seconds(10));
  EXPECT_EQ(Heartbeat::silence_limit(seconds(300)), seconds(60));
}

}  // namespace
