// `--input` end to end: a language model taking token ids and a model with two inputs go
// through profile, balance, train --plan and validate, as a user runs them.
#include <nlohmann/json.hpp>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

using nlohmann::json;

const std::string kTokenLm = std::string(PIPEBAL_FIXTURES_DIR) + "/token_lm_scripted.pt";
const std::string kTwoInputs = std::string(PIPEBAL_FIXTURES_DIR) + "/chain_two_inputs_scripted.pt";

TEST(InputCli, ATokenLanguageModelGoesFromProfileToTraining) {
  const std::string dir = fresh_dir("input_token_lm");
  const std::string input = " --input 'int64[8,12]:50'";
  CliResult r = run_pipebal("profile --model " + kTokenLm + input +
                            " --chunks 2,4 --warmup 1 --repeat 2 -q -o " + dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json profile = json::parse(read_text(dir + "/profile.json"));
  EXPECT_EQ(profile["inputs"], json({"int64[8,12]:50"}));
  EXPECT_EQ(profile["input_shape"], json({8, 12}));
  EXPECT_EQ(profile["layers"].size(), 4u);  // embed, block1, block2, head

  r = run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/plan.json"))["inputs"], json({"int64[8,12]:50"}));

  r = run_pipebal("train --plan " + dir + "/plan.json --steps 2 --warmup-steps 0 -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json run = json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["inputs"], json({"int64[8,12]:50"}));
  EXPECT_EQ(run["chunks"], 2);
  EXPECT_NE(r.out.find("input int64[8,12]:50"), std::string::npos) << r.out;

  r = run_pipebal("validate --model " + kTokenLm + input +
                  " --stages 2 --chunks 2 --steps 1 --warmup-steps 1 --profile-repeat 2 -o " + dir +
                  "/validate");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/validate/plan.json"))["inputs"],
            json({"int64[8,12]:50"}));

  // Float inputs are what the embedding cannot take: the layer says so.
  r = run_pipebal("profile --model " + kTokenLm + " --input-shape 8,12 -q");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("layer 0 ('embed'"), std::string::npos) << r.err;
}

TEST(InputCli, AModelWithTwoInputsScattersBoth) {
  const std::string dir = fresh_dir("input_two");
  const std::string inputs = " --input 'float32[8,4]' --input 'float32[8,4]'";
  CliResult r = run_pipebal("profile --model " + kTwoInputs + inputs + " --chunks 4 -q -o " + dir +
                            "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/profile.json"))["input_shapes"],
            json({{2, 4}, {2, 4}}));  // both scattered into micro-batches of 2
  r = run_pipebal("train --model " + kTwoInputs + inputs +
                  " --balance 1,1 --chunks 4 --schedule 1f1b --steps 2 -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/run.json"))["inputs"],
            json({"float32[8,4]", "float32[8,4]"}));
  // One input is not enough for it.
  r = run_pipebal("train --model " + kTwoInputs + " --input 'float32[8,4]' --balance 1,1 -o " +
                  dir + "/one.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("layer 0"), std::string::npos) << r.err;
}

TEST(InputCli, APlanMadeForTypedInputsRefusesOthers) {
  const std::string dir = fresh_dir("input_plan_mismatch");
  CliResult r = run_pipebal("profile --model " + kTokenLm +
                            " --input 'int64[8,12]:50' --chunks 2 --repeat 1 --warmup 1 -q -o " +
                            dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_pipebal("train --plan " + dir + "/plan.json --input 'int64[8,12]:60' -o " + dir +
                  "/run.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("differs from the inputs the plan was made for (int64[8,12]:50)"),
            std::string::npos)
      << r.err;
  r = run_pipebal("train --plan " + dir + "/plan.json --input-shape 8,12 -o " + dir + "/run.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("leave out --input-shape"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipebal::testing
