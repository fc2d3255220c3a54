// `pipebal profile` end to end: the binary as a user runs it.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/profile_reader.h"
#include "tests/tools/cli_support.h"

namespace {

using Result = pipebal::testing::CliResult;
using pipebal::testing::count_lines;
using pipebal::testing::run_pipebal;
const auto slurp = pipebal::testing::read_text;

TEST(ProfileCommand, WritesAProfileTheBalancerReads) {
  const std::string path = pipebal::testing::scratch_path("profile.json");
  std::remove(path.c_str());
  const Result r = run_pipebal(
      "profile --model mlp:layers=2,width=8 --input-shape 8,8 "
      "--chunks 2 --repeat 3 --warmup 1 -o " +
      path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("micro-batch size 4"), std::string::npos) << r.out;
  for (const std::string column :
       {"fwd ms", "bwd ms", "params", "activations", "output", "total", "fc0", "head"}) {
    EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
  }
  EXPECT_NE(r.err.find("timed pass 3 of 3"), std::string::npos) << r.err;  // progress lines
  const nlohmann::json doc = nlohmann::json::parse(slurp(path));
  EXPECT_EQ(doc.at("schema"), "pipebal.profile/1");
  EXPECT_EQ(doc.at("batch_size"), 4);
  const pipebal::balance::CostProfile cost = pipebal::balance::read_profile(path);
  EXPECT_EQ(cost.layers.size(), 3u);
  EXPECT_EQ(cost.batch_size, 4);
  // On the CPU the engine's own costs come with the layers, and the summary says them.
  ASSERT_TRUE(cost.engine.has_value());
  EXPECT_GE(cost.engine->step_ms, 0.0);
  EXPECT_GE(cost.engine->action_ms, 0.0);
  EXPECT_NE(r.out.find("the engine's own costs:"), std::string::npos) << r.out;
}

TEST(ProfileCommand, HelpHasAnExample) {
  const Result r = run_pipebal("profile --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Example"), std::string::npos);
  EXPECT_NE(r.out.find("--backend"), std::string::npos);
}

}  // namespace
