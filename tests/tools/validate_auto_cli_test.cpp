// `pipebal validate --auto`: the plan's best configurations, the plain model and the user's own
// trained side by side, and validate's warning when a configuration is predicted to lose.
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"
#include "pipebal/profiler/statistics.h"
#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

using nlohmann::json;

const std::string kModel = "--model mlp:layers=4,width=32 --input-shape 16,32";

TEST(PlanCli, ValidateAutoTrainsThePlansBestThePlainModelAndYours) {
  const std::string dir = fresh_dir("plan_validate_auto");
  const CliResult r = run_pipebal("validate " + kModel +
                                  " --auto --devices 2 --top 2 --stages 2 --chunks 4 "
                                  "--steps 2 --warmup-steps 1 --profile-repeat 3 "
                                  "--profile-rounds 2 --profile-in-turns -o " +
                                  dir + "/out");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the plan's pick measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round by round (the median of the rounds' ratios) it ran "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(round 2 of 2)"), std::string::npos) << r.out;
  const json v = json::parse(read_text(dir + "/out/plan-validation.json"));
  EXPECT_EQ(v["schema"], "pipebal.plan-validation/1");
  EXPECT_EQ(v["devices"], 2);
  const json& configs = v["configurations"];
  std::set<std::string> labels;
  std::set<int> predicted_ranks, measured_ranks;
  double wide_in_turns_ms = 0;
  for (const json& c : configs) {
    for (const json& label : c["labels"]) labels.insert(label.get<std::string>());
    predicted_ranks.insert(c["predicted_rank"].get<int>());
    measured_ranks.insert(c["measured_rank"].get<int>());
    EXPECT_GT(c["measured_step_ms"].get<double>(), 0);
    // Every measured step, one a round; two rounds: their median is their mean.
    const auto steps = c["measured_steps_ms"].get<std::vector<double>>();
    ASSERT_EQ(steps.size(), 2u) << c.dump();
    EXPECT_NEAR(c["measured_step_ms"].get<double>(), (steps[0] + steps[1]) / 2, 1e-9) << c.dump();
    // Predicted again from the profiles taken after each round (other samples, other times),
    // the plain model on several threads from the one taken on its own run's thread.
    EXPECT_GT(c["predicted_in_turns_step_ms"].get<double>(), 0) << c.dump();
    EXPECT_NE(c["predicted_in_turns_step_ms"], c["predicted_step_ms"]) << c.dump();
    EXPECT_TRUE(c.contains("step_error_in_turns")) << c.dump();
    if (c["threads_per_stage"].get<int>() > 1) {
      wide_in_turns_ms = c["predicted_in_turns_step_ms"].get<double>();
    }
    int layers = 0;
    for (const json& n : c["balance"]) layers += n.get<int>();
    EXPECT_EQ(layers, 5);
  }
  EXPECT_TRUE(labels.count("plan 1") && labels.count("plan 2") && labels.count("plain") &&
              labels.count("yours"))
      << configs.dump();
  if (pipebal::usable_cores() >= 2) {  // the plain model on both devices' threads
    EXPECT_TRUE(labels.count("plain, 2 threads")) << configs.dump();
  }
  // Ranks are a permutation of 1..N, the predicted one in the planner's order.
  std::set<int> all;
  for (int k = 1; k <= static_cast<int>(configs.size()); ++k) all.insert(k);
  EXPECT_EQ(predicted_ranks, all);
  EXPECT_EQ(measured_ranks, all);
  // The recommendation comes first (the plan's pick), then the plan's best by predicted time.
  EXPECT_EQ(configs[0]["labels"][0], "recommended");
  for (const json& c : configs) {
    for (const json& label : c["labels"]) {
      if (label == "plan 1") {
        EXPECT_EQ(c["predicted_rank"], 1) << c.dump();
      }
    }
  }
  // The plan written is the plan's pick, and the profile holds the sizes it was chosen from.
  EXPECT_EQ(json::parse(read_text(dir + "/out/plan.json"))["balance"], configs[0]["balance"]);
  const json profile = json::parse(read_text(dir + "/out/profile.json"));
  EXPECT_EQ(profile["sizes"].size(), 5u);  // 1..16
  // Two rounds of ceil(3 / 2) passes each, pooled: 4 samples per layer where one round has 3
  // (profile.json keeps the samples of the profile's own size).
  const auto expect_pooled = [](const json& layers) {
    for (const json& layer : layers) {
      EXPECT_EQ(layer["forward_samples_ms"].size(), 4u) << layer.dump();
      EXPECT_EQ(layer["backward_samples_ms"].size(), 4u) << layer.dump();
    }
  };
  expect_pooled(profile["layers"]);
  if (pipebal::usable_cores() < 2) return;
  expect_pooled(json::parse(read_text(dir + "/out/profile-threads.json"))["layers"]);
  // The plain model on 2 threads profiled after each of the 2 measured rounds, 2 passes each, on
  // its run's 2-thread pool; its prediction in turns is what `balance` predicts from that profile.
  const std::string wide = dir + "/out/profile-threads-in-turns.json";
  const json wide_profile = json::parse(read_text(wide));
  EXPECT_EQ(wide_profile["environment"]["intra_op_threads"], 2);
  for (const json& layer : wide_profile["layers"]) {
    EXPECT_EQ(layer["forward_samples_ms"].size(), 4u) << layer.dump();
  }
  EXPECT_TRUE(wide_profile.contains("engine")) << "kept from the profile taken up front";
  const CliResult priced = run_pipebal("balance " + wide + " --stages 1 --chunks 1 --json");
  ASSERT_EQ(priced.status, 0) << priced.err;
  EXPECT_DOUBLE_EQ(wide_in_turns_ms,
                   json::parse(priced.out)["prediction"]["step_ms"].get<double>());
}

// 32 micro-batches of 2 samples through a tiny model: each call's fixed cost dwarfs its work, so
// the prediction says one micro-batch is faster, and validate says so on stderr.
TEST(PlanCli, ValidateWarnsWhenItsConfigurationIsPredictedToLose) {
  const std::string dir = fresh_dir("plan_validate_warns");
  const CliResult r = run_pipebal(
      "validate --model mlp:layers=2,width=8 --input-shape 64,8 --stages 2 --chunks 32 "
      "--steps 1 --warmup-steps 1 --profile-repeat 2 -o " +
      dir + "/out");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("is predicted slower with 32 micro-batches than with 1"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("`pipebal validate --auto`"), std::string::npos) << r.err;
}

// --bind-cores: each device's stage pinned to a core of its own, the plain model timed on each,
// the plan made with their speeds (the fastest first), and the runs pinned so.
TEST(PlanCli, ValidateAutoBindCoresPlansWithEachCoresSpeed) {
  const std::string dir = fresh_dir("plan_validate_bind");
  const std::string command = "validate " + kModel +
                              " --auto --devices 2 --top 2 --bind-cores --stages 2 --chunks 2 "
                              "--steps 1 "
                              "--warmup-steps 1 --profile-repeat 2 --profile-in-turns -o " +
                              dir + "/out";
  const CliResult r = run_pipebal(command);
  if (pipebal::allowed_cpus().size() < 2) {
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--bind-cores: 2 devices of 1 thread each need 2 cores of their own"),
              std::string::npos)
        << r.err;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("planning with device 0: CPU "), std::string::npos) << r.out;
  const json v = json::parse(read_text(dir + "/out/plan-validation.json"));
  const auto cpus = v["device_cpus"].get<std::vector<std::vector<int>>>();
  const auto speeds = v["device_speeds"].get<std::vector<double>>();
  ASSERT_EQ(cpus.size(), 2u);
  ASSERT_EQ(speeds.size(), 2u);
  EXPECT_EQ(cpus[0].size(), 1u);
  EXPECT_EQ(cpus[1].size(), 1u);
  EXPECT_NE(cpus[0], cpus[1]);
  // Timed in 3 rounds before the profile and 3 after it, fastest (before) first; the plan's
  // speeds relative to the first device, round by round.
  const auto times = v["device_times_ms"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(times.size(), 2u);
  ASSERT_EQ(times[0].size(), 6u);
  ASSERT_EQ(times[1].size(), 6u);
  std::vector<double> before0(times[0].begin(), times[0].begin() + 3),
      before1(times[1].begin(), times[1].begin() + 3);
  EXPECT_LE(pipebal::profiler::median(before0), pipebal::profiler::median(before1));
  EXPECT_EQ(speeds[0], 1.0);
  double ratios = 0;
  for (size_t r = 0; r < 6; ++r) ratios += times[1][r] / times[0][r];
  EXPECT_NEAR(speeds[1], 6 / ratios, 1e-12);
  // Timed again after each round in turns, relative to the first device.
  const auto in_turns = v["device_speeds_in_turns"].get<std::vector<double>>();
  ASSERT_EQ(in_turns.size(), 2u);
  EXPECT_EQ(in_turns[0], 1.0);
  EXPECT_GT(in_turns[1], 0.0);
  // Your 2 stages were costed with those speeds: as `balance` prices them given the speeds.
  const json* yours = nullptr;
  for (const json& c : v["configurations"]) {
    EXPECT_GT(c["predicted_in_turns_step_ms"].get<double>(), 0) << c.dump();
    for (const json& label : c["labels"]) {
      if (label == "yours") yours = &c;
    }
  }
  ASSERT_NE(yours, nullptr) << v.dump();
  const std::string price = fmt::format(
      "balance {}/out/profile.json --stages 2 --chunks 2 --schedule gpipe --checkpoint "
      "except_last --balance {} --json",
      dir, fmt::join((*yours)["balance"].get<std::vector<int>>(), ","));
  const CliResult with_speeds =
      run_pipebal(price + fmt::format(" --device-speeds 1,{:.17g}", speeds[1]));
  ASSERT_EQ(with_speeds.status, 0) << with_speeds.err;
  EXPECT_DOUBLE_EQ((*yours)["predicted_step_ms"].get<double>(),
                   json::parse(with_speeds.out)["prediction"]["step_ms"].get<double>());
  const json plan = json::parse(read_text(dir + "/out/plan.json"));
  for (size_t s = 0; s < plan["stages"].size(); ++s) {
    EXPECT_DOUBLE_EQ(plan["stages"][s]["speed"].get<double>(), speeds[s]) << plan.dump();
  }
  // More devices than CPUs: one line, status 2, before any work.
  const size_t cpus_here = pipebal::allowed_cpus().size();
  if (cpus_here >= 64) return;  // --devices goes to 64
  const CliResult too_many = run_pipebal(fmt::format(
      "validate {} --auto --devices {} --bind-cores -o {}/refused", kModel, cpus_here + 1, dir));
  EXPECT_EQ(too_many.status, 2) << too_many.err;
  EXPECT_NE(too_many.err.find(
                fmt::format("--bind-cores: {} devices of 1 thread each need {} cores of their own",
                            cpus_here + 1, cpus_here + 1)),
            std::string::npos)
      << too_many.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/refused"));
}

TEST(PlanCli, ValidateAutoRefusesWhatDoesNotGoTogether) {
  const std::string dir = fresh_dir("plan_validate_bad");
  CliResult r = run_pipebal("validate " + kModel + " --devices 2 -o " + dir + "/a");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(
      r.err.find("--devices, --top, --min-gain, --schedules, --checkpoints, --profile-rounds, "
                 "--bind-cores and --profile-in-turns go with --auto"),
      std::string::npos)
      << r.err;
  r = run_pipebal("validate " + kModel + " --auto --processes 2 -o " + dir + "/b");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--auto trains as threads"), std::string::npos) << r.err;
  r = run_pipebal("validate " + kModel + " --auto --devices 2 --stages 3 -o " + dir + "/c");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("your configuration's 3 stages need 3 devices"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipebal::testing
