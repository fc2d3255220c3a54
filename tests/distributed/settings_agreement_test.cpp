// The processes of a run agree on their settings: rank 0 names the lowest rank that differs and
// its first setting that does, with both values (or, for a digest, without them); a rank whose
// settings cannot be compared setting by setting (another pipebal's) is named as such. Through a
// real rendezvous (two ranks as threads on loopback): agreeing ranks go on, rank 0 refuses a
// difference and the other rank stops as its echo, and a rank that posts nothing is named at the
// timeout.

#include <chrono>
#include <functional>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "pipebal/distributed/group.h"
#include "pipebal/distributed/settings_agreement.h"
#include "tests/support/loopback_port.h"

namespace {

using pipebal::distributed::Group;
using pipebal::distributed::LaunchEnv;
using pipebal::distributed::PeerFailed;
using pipebal::distributed::RemoteFailure;
using pipebal::distributed::require_same_settings;
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

// What each rank's `agree` (given its group) returned or threw, as text: "ok", or the
// exception's kind and message.
std::pair<std::string, std::string> two_ranks(const std::function<void(Group&)>& rank0,
                                              const std::function<void(Group&)>& rank1) {
  const int port = pipebal::testing::free_loopback_port();
  auto run = [port](int rank, const std::function<void(Group&)>& agree) -> std::string {
    LaunchEnv env;
    env.rank = rank;
    env.world_size = 2;
    env.local_world_size = 2;
    env.local_rank = rank;
    env.master_port = port;
    try {
      Group group(env, std::chrono::seconds(2));
      agree(group);
      return "ok";
    } catch (const PeerFailed& error) {
      return std::string("PeerFailed: ") + error.what();
    } catch (const RemoteFailure& error) {
      return std::string("RemoteFailure: ") + error.what();
    } catch (const std::invalid_argument& error) {
      return std::string("invalid_argument: ") + error.what();
    }
  };
  auto first = std::async(std::launch::async, run, 0, rank0);
  auto second = std::async(std::launch::async, run, 1, rank1);
  return {first.get(), second.get()};
}

TEST(SettingsAgreement, RanksWithTheSameSettingsGoOn) {
  const auto agree = [](Group& group) { require_same_settings(group, settings("4")); };
  EXPECT_EQ(two_ranks(agree, agree), std::make_pair(std::string("ok"), std::string("ok")));
}

TEST(SettingsAgreement, RankZeroRefusesADifferenceAndTheOtherStopsAsItsEcho) {
  const auto [rank0, rank1] =
      two_ranks([](Group& group) { require_same_settings(group, settings("4")); },
                [](Group& group) { require_same_settings(group, settings("8")); });
  const std::string line = "rank 1's --chunks is 8, rank 0's is 4" + kWhy;
  EXPECT_EQ(rank0, "invalid_argument: " + line);
  EXPECT_EQ(rank1, "PeerFailed: stopped: rank 0 failed: " + line);
}

TEST(SettingsAgreement, ARankThatPostsNoSettingsIsNamedAtTheTimeout) {
  // Rank 1 as a pipebal from before the agreement: joined, then busy with other things.
  const auto [rank0, rank1] =
      two_ranks([](Group& group) { require_same_settings(group, settings("4")); },
                [](Group&) { std::this_thread::sleep_for(std::chrono::seconds(3)); });
  EXPECT_EQ(rank0,
            "RemoteFailure: rank 1 posted no settings (waited 2 s for settings/1 in the "
            "rendezvous store): does it run another pipebal? every process of a run must be "
            "given the same settings");
  EXPECT_EQ(rank1, "ok");
}

}  // namespace
