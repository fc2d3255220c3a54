// `pipebal validate --plans`: plans made by `pipebal balance` for several schedules, trained side
// by side step by step in turns, each prediction beside its measurement, end to end as a user
// runs them.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

using nlohmann::json;

const std::string kModel = "--model mlp:layers=4,width=32 --input-shape 16,32";

// A profile of kModel at 4 micro-batches and a dp plan per schedule, DIR/<schedule>.json.
void plan_schedules(const std::string& dir, const std::vector<std::string>& schedules) {
  CliResult r =
      run_pipebal("profile " + kModel + " --chunks 4 --threads 1 --warmup 1 --repeat 3 -q -o " +
                  dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& schedule : schedules) {
    r = run_pipebal("balance " + dir + "/profile.json --stages 2 --schedule " + schedule +
                    " --checkpoint never -o " + dir + "/" + schedule + ".json");
    ASSERT_EQ(r.status, 0) << r.err;
  }
}

int64_t sum(const json& values) {
  int64_t total = 0;
  for (const json& v : values) total += v.get<int64_t>();
  return total;
}

TEST(PlansCli, ValidatePlansTrainsEveryPlanInTurnsAndPredictsThemAgainFromProfilesInTurns) {
  const std::string dir = fresh_dir("validate_plans");
  const std::vector<std::string> schedules = {"gpipe", "1f1b", "zb-h1"};
  plan_schedules(dir, schedules);
  const CliResult r =
      run_pipebal("validate --plans " + dir + "/gpipe.json " + dir + "/1f1b.json " + dir +
                  "/zb-h1.json --steps 3 --warmup-steps 2 --profile-in-turns -o " + dir + "/out");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("training 3 plans of mlp:layers=4,width=32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured fastest: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round 3 of 3 done"), std::string::npos) << r.out;
  const json v = json::parse(read_text(dir + "/out/plans-comparison.json"));
  EXPECT_EQ(v["schema"], "pipebal.plans-comparison/1");
  EXPECT_EQ(v["input_shape"], json({16, 32}));
  ASSERT_EQ(v["plans"].size(), 3u);
  std::set<int> predicted_ranks, measured_ranks;
  for (size_t k = 0; k < schedules.size(); ++k) {
    const json& c = v["plans"][k];
    const json plan = json::parse(read_text(dir + "/" + schedules[k] + ".json"));
    // In the order given, each with its own plan's balance, schedule and prediction.
    EXPECT_EQ(c["file"], dir + "/" + schedules[k] + ".json");
    EXPECT_EQ(c["schedule"], schedules[k]);
    EXPECT_EQ(c["balance"], plan["balance"]);
    EXPECT_EQ(c["predicted_step_ms"], plan["prediction"]["step_ms"]);
    int64_t predicted_device = 0;
    for (const json& stage : plan["stages"])
      predicted_device += stage["timed_memory_bytes"].get<int64_t>();
    EXPECT_EQ(sum(c["predicted_device_bytes"]), predicted_device) << c.dump();
    // Every measured step, and their median as the step time.
    std::vector<double> steps = c["measured_steps_ms"].get<std::vector<double>>();
    ASSERT_EQ(steps.size(), 3u);
    std::sort(steps.begin(), steps.end());
    EXPECT_EQ(c["measured_step_ms"].get<double>(), steps[1]);
    predicted_ranks.insert(c["predicted_rank"].get<int>());
    measured_ranks.insert(c["measured_rank"].get<int>());

    // The memory each device held is what `train --plan` measures on its own, the runs side by
    // side counted apart, up to one message: a message not yet taken is its sender's, and when
    // the receiver takes it depends on timing. One message here: an activation or gradient of
    // 4 samples x 32 floats.
    const int64_t message_bytes = 4 * 32 * 4;
    const CliResult alone = run_pipebal("train --plan " + dir + "/" + schedules[k] +
                                        ".json --steps 1 -q -o " + dir + "/run.json");
    ASSERT_EQ(alone.status, 0) << alone.err;
    const json run = json::parse(read_text(dir + "/run.json"));
    ASSERT_EQ(c["measured_device_bytes"].size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      const int64_t side_by_side = c["measured_device_bytes"][s].get<int64_t>();
      const int64_t on_its_own = run["stages"][s]["peak_memory_bytes"].get<int64_t>();
      EXPECT_GT(side_by_side, 0);
      EXPECT_LE(std::abs(side_by_side - on_its_own), message_bytes)
          << schedules[k] << " stage " << s << ": " << side_by_side << " vs " << on_its_own;
    }

    // Predicted again from the profile taken in turns, the plan's balance and W delays kept:
    // what `pipebal balance` predicts for that balance on that profile.
    std::string flags = " --schedule " + schedules[k];
    if (plan.contains("weight_delays")) {
      std::string delays;
      for (const json& d : plan["weight_delays"]) {
        delays += (delays.empty() ? "" : ",") + std::to_string(d.get<int>());
      }
      flags += " --weight-delays " + delays;
    }
    const CliResult priced = run_pipebal(
        "balance " + dir + "/out/profile-in-turns.json --stages 2 --chunks 4" + flags +
        " --checkpoint never --balance " + std::to_string(plan["balance"][0].get<int>()) + "," +
        std::to_string(plan["balance"][1].get<int>()) + " --json");
    ASSERT_EQ(priced.status, 0) << priced.err;
    EXPECT_DOUBLE_EQ(c["predicted_in_turns_step_ms"].get<double>(),
                     json::parse(priced.out)["prediction"]["step_ms"].get<double>())
        << schedules[k];
    EXPECT_NE(c["predicted_in_turns_step_ms"], c["predicted_step_ms"]);
  }
  EXPECT_EQ(predicted_ranks, std::set<int>({1, 2, 3}));
  EXPECT_EQ(measured_ranks, std::set<int>({1, 2, 3}));
  // The profile in turns: one round after each of the 3 measured steps, 2 passes each, pooled.
  const json profile = json::parse(read_text(dir + "/out/profile-in-turns.json"));
  EXPECT_EQ(profile["schema"], "pipebal.profile/1");
  EXPECT_EQ(profile["layers"][0]["forward_samples_ms"].size(), 6u);
  EXPECT_EQ(v["environment"]["intra_op_threads"], 1) << v["environment"].dump();

  // The report draws the comparison, and the layers of the profile taken in turns.
  const CliResult report = run_pipebal("report " + dir + "/out");
  ASSERT_EQ(report.status, 0) << report.err;
  const std::string html = read_text(dir + "/out/report.html");
  EXPECT_NE(html.find("Configurations trained side by side"), std::string::npos);
  EXPECT_NE(html.find("zb-h1.json"), std::string::npos);
  EXPECT_NE(html.find("id=\"layers\""), std::string::npos);
  // A new comparison replaces the directory, the report it held included.
  const CliResult again = run_pipebal("validate --plans " + dir +
                                      "/1f1b.json --steps 1 --warmup-steps 1 -o " + dir + "/out");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/report.html"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/profile-in-turns.json"));
  EXPECT_EQ(json::parse(read_text(dir + "/out/plans-comparison.json"))["plans"].size(), 1u);
}

// `balance --schedule-plans DIR` writes the schedule comparison's plans, each the plan `balance
// --schedule` makes on its own, and `validate --plans DIR/*.json` measures them.
TEST(PlansCli, BalanceWritesEverySchedulesPlanForValidatePlans) {
  const std::string dir = fresh_dir("schedule_plans");
  plan_schedules(dir, {"1f1b"});
  // An earlier run's plan for a schedule that gets none now: removed, not measured beside them.
  std::filesystem::create_directory(dir + "/plans");
  ASSERT_EQ(run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir +
                        "/plans/interleaved-3.json")
                .status,
            0);
  CliResult r = run_pipebal("balance " + dir + "/profile.json --stages 2 --checkpoint never " +
                            "--schedule-plans " + dir + "/plans");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("pipebal validate --plans " + dir + "/plans/*.json"), std::string::npos)
      << r.out;
  // 5 layers: interleaved with 3 stages per device would need 6, and is said, not written.
  EXPECT_NE(r.out.find("interleaved 3   "), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/plans/interleaved-3.json"));
  EXPECT_NE(r.out.find("removed " + dir + "/plans/interleaved-3.json, an earlier run's plan"),
            std::string::npos)
      << r.out;
  const std::vector<std::pair<std::string, std::string>> written = {
      {"gpipe", "--schedule gpipe"},
      {"1f1b", "--schedule 1f1b"},
      {"interleaved-2", "--schedule interleaved --virtual 2"},
      {"zb-h1", "--schedule zb-h1"}};
  for (const auto& [name, flags] : written) {
    r = run_pipebal("balance " + dir + "/profile.json --stages 2 --checkpoint never " + flags +
                    " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    json alone = json::parse(r.out);
    json from_comparison = json::parse(read_text(dir + "/plans/" + name + ".json"));
    EXPECT_EQ(from_comparison, alone) << name;
    EXPECT_EQ(from_comparison["model"], "mlp:layers=4,width=32,classes=10") << name;
  }
  r = run_pipebal("validate --plans " + dir + "/plans/*.json --steps 1 --warmup-steps 1 -o " + dir +
                  "/out");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/out/plans-comparison.json"))["plans"].size(), 4u);
}

// Given W delays are zb-h1's: the comparison's other schedules run without them, as on their own.
TEST(PlansCli, TheComparisonGivesWeightDelaysToZeroBubbleOnly) {
  const std::string dir = fresh_dir("schedule_plans_delays");
  plan_schedules(dir, {"1f1b"});
  const std::string profile = "balance " + dir + "/profile.json --stages 2 --checkpoint never ";
  CliResult r = run_pipebal(profile + "--schedule zb-h1 --weight-delays 0,1 --schedule-plans " +
                            dir + "/plans");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("W delays go with"), std::string::npos) << r.out;
  const std::vector<std::pair<std::string, std::string>> written = {
      {"gpipe", "--schedule gpipe"},
      {"1f1b", "--schedule 1f1b"},
      {"interleaved-2", "--schedule interleaved --virtual 2"},
      {"zb-h1", "--schedule zb-h1 --weight-delays 0,1"}};
  for (const auto& [name, flags] : written) {
    r = run_pipebal(profile + flags + " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(read_text(dir + "/plans/" + name + ".json")), json::parse(r.out)) << name;
  }
  EXPECT_EQ(json::parse(read_text(dir + "/plans/zb-h1.json"))["weight_delays"],
            json::parse("[0, 1]"));
}

// Chunk counts that mean one micro-batch size (16 samples in 6 or in 7: 3 each) share that size's
// profile in turns, which profiles each size once.
TEST(PlansCli, ChunkCountsOfOneMicroBatchSizeShareTheProfileInTurns) {
  const std::string dir = fresh_dir("plans_same_size");
  CliResult r = run_pipebal("profile " + kModel + " --chunks 6 --warmup 1 --repeat 1 -q -o " + dir +
                            "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string chunks : {"6", "7"}) {
    r = run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks " + chunks + " -o " +
                    dir + "/" + chunks + ".json");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  r = run_pipebal("validate --plans " + dir + "/6.json " + dir + "/7.json --steps 1 " +
                  "--warmup-steps 1 --profile-in-turns -o " + dir + "/out");
  ASSERT_EQ(r.status, 0) << r.err;
  const json plans = json::parse(read_text(dir + "/out/plans-comparison.json"))["plans"];
  ASSERT_EQ(plans.size(), 2u);
  for (const json& plan : plans) EXPECT_GT(plan["predicted_in_turns_step_ms"].get<double>(), 0);
}

TEST(PlansCli, ValidatePlansRefusesPlansOfAnotherModelAndOptionsThePlansSay) {
  const std::string dir = fresh_dir("validate_plans_bad");
  plan_schedules(dir, {"1f1b"});
  CliResult r = run_pipebal(
      "profile --model mlp:layers=4,width=16 --input-shape 16,16 "
      "--chunks 4 --warmup 1 --repeat 1 -q -o " +
      dir + "/narrow.json");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_pipebal("balance " + dir + "/narrow.json --stages 2 -o " + dir + "/narrow-plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_pipebal("validate --plans " + dir + "/1f1b.json " + dir + "/narrow-plan.json -o " + dir +
                  "/out");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("narrow-plan.json is for the model mlp:layers=4,width=16"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("compare plans of one model and input"), std::string::npos) << r.err;
  // The configuration is the plans': a flag that would change it is refused, not ignored.
  r = run_pipebal("validate --plans " + dir + "/1f1b.json --chunks 8 -o " + dir + "/out");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("drop --chunks"), std::string::npos) << r.err;
  // Nothing half-written.
  EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
}

}  // namespace
}  // namespace pipebal::testing
