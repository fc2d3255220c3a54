// The interleaved schedule from the command line: balance plans it (the search's optimum over
// devices x stages per device), plan searches it when listed, train --plan runs it, validate
// measures it beside the prediction, and every misuse is one line naming the rule.
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

void expect_error(const std::string& args, const std::string& fragment) {
  const CliResult r = run_pipebal(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
  EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
}

TEST(InterleavedCli, BalanceTrainAndValidate) {
  const std::string dir = scratch_dir();
  const std::string model = "--model mlp:layers=8,width=16 --input-shape 16,16";
  CliResult r = run_pipebal("profile " + model + " --chunks 4 --repeat 2 --warmup 1 -q -o " + dir +
                            "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_pipebal("balance " + dir +
                  "/profile.json --stages 2 --schedule interleaved --virtual 2 -o " + dir +
                  "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 devices of 2 stages each"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the smallest simulated step"), std::string::npos) << r.out;
  const auto plan = nlohmann::json::parse(read_text(dir + "/plan.json"));
  EXPECT_EQ(plan["schedule"], "interleaved");
  EXPECT_EQ(plan["virtual_stages"], 2);
  EXPECT_EQ(plan["balance"].size(), 4u);
  EXPECT_EQ(plan["search"]["exhaustive"], true);

  r = run_pipebal("train --plan " + dir + "/plan.json --steps 2 --warmup-steps 0 -q -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto run = nlohmann::json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["schedule"], "interleaved");
  EXPECT_EQ(run["virtual_stages"], 2);
  EXPECT_EQ(run["balance"], plan["balance"]);

  // The planner searches it when asked, and its plan trains as is: planned from the layers alone
  // (see without_engine_costs), each as costly as the next, so that interleaving surely pays
  // (the measured microseconds of these layers, the head's backward 3x the others', can leave
  // 1F1B as fast).
  const std::string even = without_engine_costs(dir + "/profile.json");
  nlohmann::json layers_alone = nlohmann::json::parse(read_text(even));
  for (auto& layer : layers_alone["layers"]) {
    layer["forward_ms"] = 0.1;
    layer["backward_ms"] = 0.2;
    if (layer.contains("weight_ms")) layer["weight_ms"] = 0.1;
    if (layer.contains("input_grad_ms")) layer["input_grad_ms"] = 0.1;
  }
  std::ofstream(even) << layers_alone.dump();
  r = run_pipebal("plan " + even + " --devices 2 --schedules 1f1b,interleaved -o " + dir +
                  "/planned.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("interl. "), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/planned.json"))["schedule"], "interleaved");
  r = run_pipebal("train --plan " + dir + "/planned.json --steps 1 --warmup-steps 0 -q -o " + dir +
                  "/planned-run.json");
  ASSERT_EQ(r.status, 0) << r.err;

  r = run_pipebal("validate " + model +
                  " --stages 2 --schedule interleaved --chunks 4 --profile-repeat 2 --steps 1 "
                  "--warmup-steps 0 -o " +
                  dir + "/validated");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto validation = nlohmann::json::parse(read_text(dir + "/validated/validation.json"));
  EXPECT_EQ(validation["schedule"], "interleaved");
  EXPECT_EQ(validation["stages"], 4);  // 2 devices x 2 (the default --virtual)
  EXPECT_GT(validation["candidates"][0]["measured"]["step_ms"].get<double>(), 0);
}

TEST(InterleavedCli, MisuseIsOneLine) {
  const std::string train = "train --model mlp:layers=8,width=16 --input-shape 16,16 -q ";
  expect_error(train + "--balance 2,2,2,3 --schedule interleaved --virtual 2 --chunks 3",
               "micro-batches (3) to be a multiple of the devices (2)");
  expect_error(train + "--balance 2,2,2,3 --schedule interleaved --virtual 3",
               "stages (4) to be a multiple of the stages per device (3)");
  expect_error(train + "--balance 4,5 --virtual 2", "--virtual 2 goes with --schedule interleaved");
  // Two stages of two per device are one device: it runs, with a word that nothing interleaves.
  const CliResult one_device =
      run_pipebal(train + "--balance 4,5 --schedule interleaved --steps 1 --warmup-steps 0");
  EXPECT_EQ(one_device.status, 0) << one_device.err;
  EXPECT_NE(one_device.err.find("pipebal: warning: interleaved with 2 stages per device puts all "
                                "2 stages on one device"),
            std::string::npos)
      << one_device.err;
  expect_error(
      "validate --model mlp:layers=8,width=16 --auto --virtual 2 -o " + scratch_dir() + "/v",
      "--virtual goes without --auto");
}

}  // namespace
}  // namespace pipebal::testing
