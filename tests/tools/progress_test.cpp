// The progress line: live on a terminal (rewritten in place, with an estimate of the time
// left), plain flushed lines elsewhere, nothing when quiet.
#include "tools/progress.h"

#include <chrono>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace pipebal::tools {
namespace {

TEST(Progress, LiveLineIsRewrittenInPlaceAndEndedOnce) {
  std::ostringstream out;
  {
    Progress progress(out, Progress::Mode::kLive);
    progress.update("timed pass", 1, 4);
    progress.update("timed pass", 2, 4, "fc0");
    progress.update("timed pass", 4, 4);
  }
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("\r\033[Ktimed pass 1 of 4, elapsed ", 0), 0u) << text;
  EXPECT_NE(text.find("\r\033[Ktimed pass 2 of 4 (fc0), elapsed "), std::string::npos) << text;
  EXPECT_NE(text.find("left in this phase"), std::string::npos) << "an estimate while running";
  const auto last = text.rfind('\r');
  EXPECT_EQ(text.substr(last).find("left"), std::string::npos) << "no estimate when done";
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

TEST(Progress, LinesModeKeepsTheFirstAndLastOfEachPhase) {
  std::ostringstream out;
  Progress progress(out, Progress::Mode::kLines);
  for (size_t i = 1; i <= 100; ++i) progress.update("layer", i, 100);
  progress.update("timed pass", 1, 2);
  progress.finish();
  const std::string text = out.str();
  EXPECT_NE(text.find("layer 1 of 100, elapsed"), std::string::npos) << text;
  EXPECT_NE(text.find("layer 100 of 100, elapsed"), std::string::npos) << text;
  EXPECT_NE(text.find("timed pass 1 of 2, elapsed"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
  // At most one line a second in between: 100 quick updates do not print 100 lines.
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 10);
}

TEST(Progress, QuietPrintsNothing) {
  std::ostringstream out;
  Progress progress(out, Progress::Mode::kQuiet);
  progress.update("step", 1, 2);
  progress.finish();
  EXPECT_EQ(out.str(), "");
}

TEST(Progress, StaysSilentUntilItsDelayHasPassed) {
  std::ostringstream out;
  Progress silent(out, Progress::Mode::kLines, std::chrono::hours(1));
  silent.update("configurations costed", 1, 2);
  silent.update("configurations costed", 2, 2);
  EXPECT_EQ(out.str(), "");
  Progress delayed(out, Progress::Mode::kLines, std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  delayed.update("configurations costed", 2, 2);
  EXPECT_EQ(out.str().rfind("configurations costed 2 of 2, elapsed", 0), 0u) << out.str();
}

TEST(Progress, SecondsReadAsAPersonWritesThem) {
  EXPECT_EQ(format_seconds(1.25), "1.2 s");
  EXPECT_EQ(format_seconds(185), "3 min 05 s");
}

}  // namespace
}  // namespace pipebal::tools
