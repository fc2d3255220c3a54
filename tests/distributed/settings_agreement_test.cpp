// The processes of a run agree on their settings: rank 0 names the lowest rank that differs and
// its first setting that does, with both values (or, for a digest, without them); a rank whose
// settings cannot be compared setting by setting (another pipebal's) is named as such.
#include <gtest/gtest.h>

#include "distributed/settings_agreement.h"

namespace {

using pipebal::distributed::settings_difference;
using pipebal::distributed::SharedSettings;

SharedSettings settings(const std::string& chunks, const std::string& weights = "ab12") {
  return {{"pipebal build", "1234567"},
          {"--chunks", chunks},
          {"--seed", "0"},
          {"model weights", weights, true}};
}

const std::string kWhy = ": every process of a run must be given the same settings";

TEST(SettingsAgreement, EqualSettingsAgree) {
  EXPECT_EQ(settings_difference({settings("4")}), std::nullopt);
  EXPECT_EQ(settings_difference({settings("4"), settings("4"), settings("4")}), std::nullopt);
}

TEST(SettingsAgreement, TheLowestRankThatDiffersIsNamedWithBothValues) {
  EXPECT_EQ(settings_difference({settings("4"), settings("4"), settings("8"), settings("2")}),
            "rank 2's --chunks is 8, rank 0's is 4" + kWhy);
  SharedSettings seed = settings("4");
  seed[2].value = "5";
  EXPECT_EQ(settings_difference({settings("4"), seed}),
            "rank 1's --seed is 5, rank 0's is 0" + kWhy);
}

TEST(SettingsAgreement, ADigestIsNamedWithoutItsValue) {
  EXPECT_EQ(settings_difference({settings("4"), settings("4", "cd34")}),
            "rank 1's model weights differ from rank 0's" + kWhy);
  // The first setting that differs is named, though a later one differs too.
  EXPECT_EQ(settings_difference({settings("4"), settings("8", "cd34")}),
            "rank 1's --chunks is 8, rank 0's is 4" + kWhy);
}

TEST(SettingsAgreement, SettingsThatCannotBeComparedOneByOneAreOtherSettings) {
  const std::string other =
      "rank 1 was started with other settings than rank 0 (another pipebal?)" + kWhy;
  SharedSettings fewer = settings("4");
  fewer.pop_back();
  EXPECT_EQ(settings_difference({settings("4"), fewer}), other);
  SharedSettings renamed = settings("4");
  renamed[1].name = "--micro-batches";
  EXPECT_EQ(settings_difference({settings("4"), renamed}), other);
  EXPECT_EQ(settings_difference({settings("4"), SharedSettings{}}), other);
}

}  // namespace
