// torchrun's environment, read the way torchrun sets it; anything malformed is one clear error.
#include "pipebal/distributed/launch_env.h"

#include <map>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::distributed {
namespace {

std::optional<LaunchEnv> read(const std::map<std::string, std::string>& vars) {
  return launch_env_from([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no error";
}

// pipebal launch --bind-cores says so, and a process started otherwise shares its cores.
TEST(LaunchEnv, CoresOfItsOwnOnlyWhenTheLauncherBoundIt) {
  const std::map<std::string, std::string> torchrun = {
      {"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "host0"}, {"MASTER_PORT", "29500"}};
  EXPECT_FALSE(read(torchrun)->cores_of_its_own);
  auto bound = torchrun;
  bound["PIPEBAL_BIND_CORES"] = "1";
  EXPECT_TRUE(read(bound)->cores_of_its_own);
  bound["PIPEBAL_BIND_CORES"] = "0";
  EXPECT_FALSE(read(bound)->cores_of_its_own);
}

TEST(LaunchEnv, NoWorldSizeMeansOneProcess) {
  EXPECT_FALSE(read({}).has_value());
  EXPECT_FALSE(read({{"RANK", "0"}}).has_value());
  EXPECT_FALSE(read({{"RANK", ""}}).has_value());
}

// A rank other than 0 run alone is a launch gone wrong: each such process would train the
// whole model by itself and write the same output.
TEST(LaunchEnv, ARankOtherThanZeroWithoutWorldSizeIsRefused) {
  for (const std::string rank : {"3", "x"}) {
    EXPECT_EQ(error_of({{"RANK", rank}}),
              "RANK=" + rank +
                  " is set but WORLD_SIZE is not: a multi-process run needs RANK, WORLD_SIZE, "
                  "MASTER_ADDR and MASTER_PORT (pipebal launch or torchrun set them); unset RANK "
                  "to run one process");
  }
}

TEST(LaunchEnv, ReadsTorchrunsVariables) {
  const auto env = read({{"WORLD_SIZE", "4"},
                         {"RANK", "3"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "host0"},
                         {"MASTER_PORT", "29511"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                         {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "host0");
  EXPECT_EQ(env->master_port, 29511);
  EXPECT_TRUE(env->agent_store);
  EXPECT_EQ(env->restart_count, 2);
}

TEST(LaunchEnv, LocalValuesDefaultToOneHost) {
  const auto env = read(
      {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_FALSE(env->agent_store);
}

// Without LOCAL_RANK, a rank's place on its host: hosts of LOCAL_WORLD_SIZE ranks each, in
// order (rank 3 of 4 on hosts of 2 is the second of its host, not cuda:3).
TEST(LaunchEnv, ALocalRankNotGivenIsTheRanksPlaceOnItsHost) {
  const auto env = read({{"WORLD_SIZE", "4"},
                         {"RANK", "3"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "host0"},
                         {"MASTER_PORT", "29511"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 1);
}

TEST(LaunchEnv, RejectsMissingMalformedAndInconsistentValues) {
  const std::map<std::string, std::string> good = {
      {"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto vars = good;
    if (value == "<unset>") {
      vars.erase(name);
    } else {
      vars[name] = value;
    }
    return error_of(vars);
  };
  EXPECT_EQ(error_of(good), "no error");
  EXPECT_NE(with("RANK", "<unset>").find("RANK is not set"), std::string::npos);
  EXPECT_NE(with("RANK", "2").find("RANK=2: expected an integer from 0 to 1"), std::string::npos);
  EXPECT_NE(with("RANK", "1x").find("RANK=1x"), std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "0").find("WORLD_SIZE=0"), std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "99999999999").find("WORLD_SIZE="), std::string::npos);
  EXPECT_NE(with("MASTER_ADDR", "<unset>").find("MASTER_ADDR is not set"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "<unset>").find("MASTER_PORT is not set"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "70000").find("MASTER_PORT=70000"), std::string::npos);
  EXPECT_NE(with("LOCAL_RANK", "5").find("LOCAL_RANK=5"), std::string::npos);
}

}  // namespace
}  // namespace pipebal::distributed
