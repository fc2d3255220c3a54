// `pipebal profile --chunks` at several sizes, `pipebal plan` on that profile, and `pipebal train
// --plan` running what plan recommends, end to end as a user runs them.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

using nlohmann::json;

const std::string kModel = "--model mlp:layers=4,width=32 --input-shape 16,32";

// Profiles kModel at micro-batch sizes 16, 8 and 4 into DIR/profile.json, every size measured.
std::string profile_at_three_sizes(const std::string& dir) {
  const CliResult r = run_pipebal("profile " + kModel + " --chunks 1,2,4 --skip-linear 0 " +
                                  "--warmup 1 --repeat 3 -q -o " + dir + "/profile.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("per sample"), std::string::npos) << r.out;
  return dir + "/profile.json";
}

TEST(PlanCli, ProfileMeasuresEverySizeItIsGiven) {
  const std::string dir = fresh_dir("plan_profile");
  const json profile = json::parse(read_text(profile_at_three_sizes(dir)));
  EXPECT_EQ(profile["chunks"], 1);  // the first count is the profile's own
  EXPECT_EQ(profile["batch_size"], 16);
  ASSERT_EQ(profile["sizes"].size(), 3u);
  const std::vector<int> sizes = {4, 8, 16}, chunks = {4, 2, 1};
  for (size_t k = 0; k < 3; ++k) {
    const json& size = profile["sizes"][k];
    EXPECT_EQ(size["micro_batch_size"], sizes[k]);
    EXPECT_EQ(size["chunks"], chunks[k]);
    ASSERT_EQ(size["layers"].size(), profile["layers"].size());
    // Activations grow with the micro-batch: the first layer's output is size x 32 floats.
    EXPECT_EQ(size["layers"][0]["output_bytes"], sizes[k] * 32 * 4);
    for (const json& layer : size["layers"]) EXPECT_GT(layer["forward_ms"].get<double>(), 0);
  }
  // The primary layers are the size-16 ones.
  EXPECT_EQ(profile["sizes"][2]["layers"][1]["forward_ms"], profile["layers"][1]["forward_ms"]);

  // balance plans any count between the measured sizes, and refuses one outside them.
  CliResult r = run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 2");
  EXPECT_EQ(r.status, 0) << r.err;
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 8");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("micro-batches of 2 samples, outside the profiled sizes 4 to 16"),
            std::string::npos)
      << r.err;
}

TEST(PlanCli, ProfileLeavesOutSizesWhereTheCostIsLinearAndBalanceInterpolatesThem) {
  const std::string dir = fresh_dir("plan_skip_linear");
  // A tolerance of 1000% calls any cost linear: only the ends (4 and 16 samples) are measured.
  CliResult r = run_pipebal("profile " + kModel + " --chunks 1,2,4 --skip-linear 1000 " +
                            "--warmup 1 --repeat 2 -o " + dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("not measured: size 8 (the cost per sample is linear around them"),
            std::string::npos)
      << r.out;
  const json profile = json::parse(read_text(dir + "/profile.json"));
  ASSERT_EQ(profile["sizes"].size(), 2u);
  EXPECT_EQ(profile["sizes"][0]["micro_batch_size"], 4);
  EXPECT_EQ(profile["sizes"][1]["micro_batch_size"], 16);
  EXPECT_EQ(profile["skipped_sizes"], json::array({8}));

  // The size left out is planned from the two beside it.
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("costs at 8 samples per micro-batch: interpolated between the profiled 4 "
                       "and 16"),
            std::string::npos)
      << r.out;
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 4");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("interpolated"), std::string::npos) << r.out;
}

// Rounds pool their passes: every round measures the sizes the first chose, and the profile
// holds all their samples.
TEST(PlanCli, ProfileInRoundsPoolsThePassesOfEveryRound) {
  const std::string dir = fresh_dir("plan_profile_rounds");
  CliResult r = run_pipebal("profile " + kModel + " --chunks 1,2,4 --skip-linear 1000 " +
                            "--warmup 1 --repeat 4 --rounds 2 -o " + dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json profile = json::parse(read_text(dir + "/profile.json"));
  EXPECT_EQ(profile["chunks"], 1);         // the first count given is the profile's own
  ASSERT_EQ(profile["sizes"].size(), 2u);  // 4 and 16 samples, as one round would
  EXPECT_EQ(profile["skipped_sizes"], json::array({8}));
  for (const json& layer : profile["layers"]) {
    EXPECT_EQ(layer["forward_samples_ms"].size(), 4u) << layer.dump();  // 2 rounds x 2 passes
    EXPECT_EQ(layer["backward_samples_ms"].size(), 4u) << layer.dump();
  }
  // Odd splits round up: 5 passes in 2 rounds are 3 each.
  r = run_pipebal("profile " + kModel + " --chunks 2 --warmup 1 --repeat 5 --rounds 2 -q -o " +
                  dir + "/odd.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/odd.json"))["layers"][0]["forward_samples_ms"].size(),
            6u);
  r = run_pipebal("profile " + kModel + " --repeat 3 --rounds 4 -o " + dir + "/bad.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--rounds must be at most --repeat (3)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json"));
}

TEST(PlanCli, PlanRanksConfigurationsAndTrainRunsTheRecommendedOne) {
  const std::string dir = fresh_dir("plan_train");
  const std::string profile = profile_at_three_sizes(dir);
  CliResult r = run_pipebal("plan " + profile + " --devices 2 --top 50 --format json -o " + dir +
                            "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  // 2 stage counts x 3 chunk counts x 2 schedules x 3 checkpoint modes.
  EXPECT_EQ(result["searched"], 36);
  const json& ranked = result["ranked"];
  ASSERT_FALSE(ranked.empty());
  std::set<int> chunks_seen;
  for (size_t k = 0; k < ranked.size(); ++k) {
    chunks_seen.insert(ranked[k]["chunks"].get<int>());
    if (k > 0) {
      // Ranked by step time to the nanosecond (ties: fewer devices, less memory).
      EXPECT_LE(std::llround(ranked[k - 1]["step_ms"].get<double>() * 1e6),
                std::llround(ranked[k]["step_ms"].get<double>() * 1e6));
    }
    EXPECT_DOUBLE_EQ(ranked[k]["speedup"].get<double>(),
                     result["plain"]["step_ms"].get<double>() / ranked[k]["step_ms"].get<double>());
  }
  EXPECT_EQ(chunks_seen, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(result["plain"]["stages"], 1);
  EXPECT_EQ(result["plain"]["chunks"], 1);

  // plan.json is the recommended configuration, and train runs it as is.
  const json plan = json::parse(read_text(dir + "/plan.json"));
  EXPECT_EQ(plan, result["recommended"]);
  const int recommended = result["recommended_rank"].get<int>();
  ASSERT_GE(recommended, 1);
  ASSERT_LE(recommended, static_cast<int>(ranked.size()));
  const json& pick = ranked[recommended - 1];
  EXPECT_EQ(plan["balance"], pick["balance"]);
  EXPECT_EQ(plan["chunks"], pick["chunks"]);
  EXPECT_EQ(plan["input_shape"], json({16, 32}));
  // Only a one-stage configuration is recommended over a faster one, and only when that is
  // within --min-gain (5%) of it.
  if (recommended > 1) {
    EXPECT_EQ(pick["stages"], 1);
    EXPECT_EQ(ranked[0]["stages"], 2);
    EXPECT_LT(pick["step_ms"].get<double>(), 1.05 * ranked[0]["step_ms"].get<double>());
  }
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 2 --warmup-steps 0 -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json run = json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["balance"], plan["balance"]);
  EXPECT_EQ(run["chunks"], plan["chunks"]);
  EXPECT_EQ(run["schedule"], plan["schedule"]);
  EXPECT_EQ(run["checkpoint"], plan["checkpoint"]);

  // The table says what it recommends, or that pipelining does not pay (enough).
  r = run_pipebal("plan " + profile + " --devices 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("36 configurations searched"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plain "), std::string::npos) << r.out;
  const std::string verdict = recommended > 1            ? "pipelining does not pay enough here"
                              : ranked[0]["stages"] == 2 ? "recommended: 2 stages"
                                                         : "pipelining does not pay here";
  EXPECT_NE(r.out.find(verdict), std::string::npos) << r.out;
}

// --min-gain: with 0 the fastest configuration is recommended; with 1000% one that does not
// pipeline (the same profile, so the same ranking).
TEST(PlanCli, PlanRecommendsPipeliningOnlyAboveTheMinimumGain) {
  const std::string dir = fresh_dir("plan_min_gain");
  const std::string profile = profile_at_three_sizes(dir);
  CliResult r = run_pipebal("plan " + profile + " --devices 2 --top 50 --format json --min-gain 0");
  ASSERT_EQ(r.status, 0) << r.err;
  const json eager = json::parse(r.out);
  EXPECT_EQ(eager["recommended_rank"], 1);
  EXPECT_EQ(eager["recommended"]["balance"], eager["ranked"][0]["balance"]);

  r = run_pipebal("plan " + profile + " --devices 2 --top 50 --format json --min-gain 1000 -o " +
                  dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json cautious = json::parse(r.out);
  EXPECT_EQ(cautious["ranked"], eager["ranked"]);
  const json& pick = cautious["ranked"][cautious["recommended_rank"].get<int>() - 1];
  EXPECT_EQ(pick["stages"], 1);
  for (int k = 0; k + 1 < cautious["recommended_rank"].get<int>(); ++k) {
    EXPECT_EQ(cautious["ranked"][k]["stages"], 2);  // the faster ones it passed over pipeline
  }
  EXPECT_EQ(json::parse(read_text(dir + "/plan.json"))["balance"], json({5}));

  r = run_pipebal("plan " + profile + " --devices 2 --min-gain 1000");
  ASSERT_EQ(r.status, 0) << r.err;
  const bool passed_over = cautious["recommended_rank"].get<int>() > 1;
  EXPECT_EQ(r.out.find("pipelining does not pay enough here") != std::string::npos, passed_over)
      << r.out;
}

// A profile measured while the machine was busy gives plans for that machine: plan says so of
// the profile and of a --plain-profile alike, and nothing of an idle machine's.
TEST(PlanCli, WarnsOfProfilesMeasuredOnABusyMachine) {
  const std::string dir = fresh_dir("plan_busy");
  CliResult r = run_pipebal("profile " + kModel + " --chunks 1 --warmup 1 --repeat 2 -q -o " + dir +
                            "/measured.json");
  ASSERT_EQ(r.status, 0) << r.err;
  json doc = json::parse(read_text(dir + "/measured.json"));
  doc["environment"]["machine_load"] = {
      {"seconds", 3.0}, {"cores", 2}, {"others_cores", 1.0}, {"steal_cores", 0.0}};
  std::ofstream(dir + "/busy.json") << doc.dump();
  doc["environment"]["intra_op_threads"] = 2;
  std::ofstream(dir + "/busy-wide.json") << doc.dump();
  doc["environment"]["machine_load"]["others_cores"] = 0.0;
  std::ofstream(dir + "/idle.json") << doc.dump();
  const std::string warning =
      " was measured while the machine was busy (other processes took 1.00 of the 2 cores "
      "pipebal runs on, on average over 3.0 s): its times, and a plan from them, fit that "
      "machine; profile again on an idle one\n";
  r = run_pipebal("plan " + dir + "/busy.json --devices 2 --chunks 1 --plain-profile " + dir +
                  "/busy-wide.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.busy_warnings, "pipebal: warning: " + dir + "/busy.json" + warning +
                                 "pipebal: warning: " + dir + "/busy-wide.json" + warning);
  r = run_pipebal("plan " + dir + "/idle.json --devices 2 --chunks 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.busy_warnings, "");
}

// The plain model on 2 threads (--plain-profile), predicted 2% faster than on one device, is
// ranked first but recommended only when --min-gain is below its gain; pipelines lose here (one
// micro-batch). On one device it is not weighed, with a warning.
TEST(PlanCli, PlanRecommendsMoreThreadsOnlyAboveTheMinimumGain) {
  const std::string dir = fresh_dir("plan_threads_gain");
  CliResult r = run_pipebal("profile " + kModel + " --chunks 1 --warmup 1 --repeat 3 -q -o " + dir +
                            "/one.json");
  ASSERT_EQ(r.status, 0) << r.err;
  // The same profile as if measured on 2 threads, every layer 2% faster, the engine unchanged.
  json wide = json::parse(read_text(dir + "/one.json"));
  wide["environment"]["intra_op_threads"] = 2;
  for (json& layer : wide["layers"]) {
    for (auto& [key, value] : layer.items()) {
      if (value.is_number_float() && key.size() > 3 && key.substr(key.size() - 3) == "_ms") {
        value = value.get<double>() / 1.02;
      } else if (key.find("_samples_ms") != std::string::npos) {
        for (json& sample : value) sample = sample.get<double>() / 1.02;
      }
    }
  }
  std::ofstream(dir + "/two.json") << wide.dump(2);
  const std::string plan =
      "plan " + dir + "/one.json --devices 2 --chunks 1 --plain-profile " + dir + "/two.json";

  r = run_pipebal(plan + " --format json -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json cautious = json::parse(r.out);
  const json& fastest = cautious["ranked"][0];
  ASSERT_EQ(fastest["threads_per_stage"], 2);
  const double gain = cautious["plain"]["step_ms"].get<double>() / fastest["step_ms"].get<double>();
  ASSERT_GT(gain, 1.0);
  ASSERT_LT(gain, 1.05);
  const int rank = cautious["recommended_rank"].get<int>();
  ASSERT_GT(rank, 1);
  const json& pick = cautious["ranked"][rank - 1];
  EXPECT_EQ(pick["stages"], 1);
  EXPECT_EQ(pick["devices"], 1);
  EXPECT_EQ(pick["step_ms"], cautious["plain"]["step_ms"]);
  EXPECT_EQ(json::parse(read_text(dir + "/plan.json")), cautious["recommended"]);
  EXPECT_NE(cautious["recommended"].value("threads_per_stage", 0), 2);

  r = run_pipebal(plan);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("using more devices does not pay enough here: the plain model on 2 threads "
                       "is predicted fastest"),
            std::string::npos)
      << r.out;

  r = run_pipebal(plan + " --min-gain 0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("pipelining does not pay here: the plain model on 2 threads is predicted "
                       "fastest"),
            std::string::npos)
      << r.out;
  r = run_pipebal(plan + " --min-gain 0 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["recommended_rank"], 1);
  EXPECT_EQ(r.err, "");

  // On one device the 2-thread profile is not weighed, and the user is told why.
  r = run_pipebal("plan " + dir + "/one.json --devices 1 --chunks 1 --plain-profile " + dir +
                  "/two.json --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json one_device = json::parse(r.out);
  for (const json& config : one_device["ranked"]) {
    EXPECT_NE(config.value("threads_per_stage", 0), 2);
  }
  EXPECT_EQ(r.err,
            "pipebal: warning: a --plain-profile measured on 2 threads was not weighed: it needs "
            "2 devices, --devices is 1\n");

  // A thread count that is not one (the field is free-form context elsewhere) is refused here.
  for (const json& bad : {json(-3), json(1000000), json(2.5), json("two")}) {
    wide["environment"]["intra_op_threads"] = bad;
    std::ofstream(dir + "/bad.json") << wide.dump(2);
    r = run_pipebal("plan " + dir + "/one.json --devices 2 --plain-profile " + dir + "/bad.json");
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_EQ(r.err, "pipebal: error: --plain-profile " + dir +
                         "/bad.json: environment.intra_op_threads does not give its thread count "
                         "(1 to 4096): make it with pipebal profile --threads N\n")
        << bad;
  }
}

// Zero-bubble H1 when listed: the profile times each layer's W, the planner weighs zb-h1 against
// 1F1B, and a zb-h1 plan trains as it says.
TEST(PlanCli, ZeroBubbleIsPlannedFromTheProfilesWeightTimesAndTrains) {
  const std::string dir = fresh_dir("plan_zb");
  const std::string profile = profile_at_three_sizes(dir);
  const json doc = json::parse(read_text(profile));
  for (const json& layer : doc["layers"]) {
    EXPECT_GE(layer["weight_ms"].get<double>(), 0) << layer["name"];
    EXPECT_GE(layer["weight_held_bytes"].get<int64_t>(), 0) << layer["name"];
  }
  EXPECT_GT(doc["layers"][1]["weight_ms"].get<double>(), 0);
  // Whether zb-h1 beats 1F1B on this tiny model is the machine's to say; what must hold either way
  // is that each zb-h1 configuration planned alone is ranked beside 1F1B's, unless one of the
  // same stages, micro-batches and replicas (another schedule or checkpoint mode) is no slower
  // and holds no more.
  const std::string costs = without_engine_costs(profile);
  CliResult r =
      run_pipebal("plan " + costs + " --devices 2 --schedules zb-h1 --top 50 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json alone = json::parse(r.out);
  r = run_pipebal("plan " + costs + " --devices 2 --schedules 1f1b,zb-h1 --top 50 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json both = json::parse(r.out);
  const auto same_shape = [](const json& a, const json& b) {
    return a["stages"] == b["stages"] && a["chunks"] == b["chunks"] &&
           a["replicas"] == b["replicas"] && a["threads_per_stage"] == b["threads_per_stage"];
  };
  int pipelined = 0;
  for (const json& zb : alone["ranked"]) {
    if (zb["stages"] == 1) continue;
    ++pipelined;
    EXPECT_EQ(zb["schedule"], "zb-h1");
    const bool ranked = std::any_of(both["ranked"].begin(), both["ranked"].end(),
                                    [&](const json& c) { return c == zb; });
    const bool dominated =
        std::any_of(both["ranked"].begin(), both["ranked"].end(), [&](const json& c) {
          return same_shape(c, zb) &&
                 std::llround(c["step_ms"].get<double>() * 1e6) <=
                     std::llround(zb["step_ms"].get<double>() * 1e6) &&
                 c["peak_bytes"] <= zb["peak_bytes"];
        });
    EXPECT_TRUE(ranked || dominated) << zb.dump() << "\n" << both.dump();
  }
  EXPECT_GT(pipelined, 0) << alone.dump();
  // What was left out is counted, and a listed schedule none of whose configurations is ranked
  // is named, in the JSON and in the table.
  EXPECT_EQ(both["dominated"].get<int>(), both["searched"].get<int>() -
                                              both["over_memory"].get<int>() -
                                              static_cast<int>(both["ranked"].size()));
  const bool zb_ranked = std::any_of(both["ranked"].begin(), both["ranked"].end(),
                                     [](const json& c) { return c["schedule"] == "zb-h1"; });
  EXPECT_EQ(both["dominated_schedules"], zb_ranked ? json::array() : json::array({"zb-h1"}));
  r = run_pipebal("plan " + costs + " --devices 2 --schedules 1f1b,zb-h1 --top 50");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("zb-h1: none ranked") == std::string::npos, zb_ranked) << r.out;
  const int left_out = both["dominated"].get<int>();
  EXPECT_EQ(r.out.find(" left out: ") != std::string::npos, left_out > 0) << r.out;
  if (left_out > 0) {
    EXPECT_NE(r.out.find(std::to_string(left_out) + " configuration"), std::string::npos) << r.out;
  }
  r = run_pipebal("balance " + profile + " --stages 2 --chunks 4 --schedule zb-h1 -o " + dir +
                  "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json plan = json::parse(read_text(dir + "/plan.json"));
  EXPECT_EQ(plan["schedule"], "zb-h1");
  EXPECT_NE(r.out.find("W delays [" + std::to_string(plan["weight_delays"][0].get<int>()) + "," +
                       std::to_string(plan["weight_delays"][1].get<int>()) + "]"),
            std::string::npos)
      << r.out;
  // Stage 0 runs each W right after its B or its backward whole (-1); stage 1 defers by at most
  // H1's one micro-batch.
  const std::vector<int> delays = plan["weight_delays"].get<std::vector<int>>();
  ASSERT_EQ(delays.size(), 2u);
  EXPECT_GE(delays[0], -1);
  EXPECT_LE(delays[0], 0);
  EXPECT_GE(delays[1], -1);
  EXPECT_LE(delays[1], 1);
  // The W of micro-batch k follows the B of k + delay (or the last B) on each stage; a stage
  // with the whole backward runs no W.
  const auto expect_delays = [](const json& run, const std::vector<int>& expected) {
    EXPECT_EQ(run["weight_delays"].get<std::vector<int>>(), expected);
    for (int s = 0; s < 2; ++s) {
      std::vector<std::pair<double, std::string>> timed;
      for (const json& action : run["timeline"]) {
        if (action["stage"] != s) continue;
        timed.emplace_back(
            action["start_ms"].get<double>(),
            action["action"].get<std::string>() + std::to_string(action["micro_batch"].get<int>()));
      }
      std::stable_sort(timed.begin(), timed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::string> order;
      for (const auto& [start, name] : timed) order.push_back(name);
      if (expected[s] == -1) {
        EXPECT_EQ(std::count_if(order.begin(), order.end(),
                                [](const std::string& a) { return a[0] == 'W'; }),
                  0)
            << "stage " << s;
        continue;
      }
      for (int k = 0; k < 4; ++k) {
        const auto w = std::find(order.begin(), order.end(), "W" + std::to_string(k));
        ASSERT_NE(w, order.end()) << "stage " << s;
        const int after = std::min(k + expected[s], 3);
        EXPECT_NE(std::find(order.begin(), w, "B" + std::to_string(after)), w)
            << "stage " << s << ": W" << k << " before B" << after;
        if (k + expected[s] < 3) {
          EXPECT_EQ(std::find(order.begin(), w, "B" + std::to_string(after + 1)), w)
              << "stage " << s << ": W" << k << " after B" << after + 1;
        }
      }
    }
  };
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 2 --warmup-steps 0 -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  json run = json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["schedule"], "zb-h1");
  int weights = 0;
  for (const json& action : run["timeline"]) weights += action["action"] == "W";
  const int splitting = (delays[0] >= 0) + (delays[1] >= 0);
  EXPECT_EQ(weights, splitting * 4) << "one W per splitting stage and micro-batch";
  expect_delays(run, delays);
  // Given on the command line, the delays override the plan's.
  // Stage 0 given -1 (its backward whole), stage 1 another delay than the plan's.
  const std::vector<int> other = {-1, delays[1] == 0 ? 1 : 0};
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 1 --warmup-steps 0 " +
                  "--weight-delays " + std::to_string(other[0]) + "," + std::to_string(other[1]) +
                  " -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_delays(json::parse(read_text(dir + "/run.json")), other);
  // A delay past the 4 micro-batches runs, and is recorded, as every W after the last B.
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 1 --warmup-steps 0 " +
                  "--weight-delays 0,99 -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_delays(json::parse(read_text(dir + "/run.json")), {0, 4});
  EXPECT_NE(r.err.find("pipebal: warning: --weight-delays 0,99 with 4 micro-batches run as 0,4: "
                       "a W delay of the micro-batch count or more runs each W after the stage's "
                       "last B\n"),
            std::string::npos)
      << r.err;
  // A plan's delays past a smaller --chunks alike.
  json longer = json::parse(read_text(dir + "/plan.json"));
  longer["weight_delays"] = {0, 3};
  std::ofstream(dir + "/longer.json") << longer.dump();
  r = run_pipebal("train --plan " + dir + "/longer.json --chunks 2 --steps 1 --warmup-steps 0 -o " +
                  dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/run.json"))["weight_delays"], json({0, 2}));
  EXPECT_NE(r.err.find("the plan's W delays 0,3 with 2 micro-batches run as 0,2: "),
            std::string::npos)
      << r.err;
  // balance says so alike, and plans what runs.
  r = run_pipebal("balance " + profile +
                  " --stages 2 --chunks 4 --schedule zb-h1 "
                  "--weight-delays 100,1 -o " +
                  dir + "/long.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--weight-delays 100,1 with 4 micro-batches run as 4,1: "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/long.json"))["weight_delays"], json({4, 1}));
  r = run_pipebal("balance " + profile +
                  " --stages 2 --chunks 4 --schedule zb-h1 "
                  "--weight-delays 4,1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("--weight-delays"), std::string::npos) << r.err;
}

// validate trains zb-h1 with the delays its plan carries, its one-micro-batch baseline within
// the one micro-batch there is.
TEST(PlanCli, ValidateTrainsZeroBubbleWithThePlansWeightDelays) {
  const std::string dir = fresh_dir("validate_zb");
  const CliResult r = run_pipebal(
      "validate --model mlp:layers=3,width=16 --input-shape 12,16 --stages 3 --chunks 3 "
      "--schedule zb-h1 --weight-delays 0,1,5 --steps 1 --warmup-steps 0 --profile-repeat 2 -o " +
      dir + "/v");
  ASSERT_EQ(r.status, 0) << r.err;
  // A delay past the micro-batches is planned and trained as their count, and said to be.
  EXPECT_EQ(json::parse(read_text(dir + "/v/plan.json"))["weight_delays"], json({0, 1, 3}));
  EXPECT_EQ(json::parse(read_text(dir + "/v/run.json"))["weight_delays"], json({0, 1, 3}));
  EXPECT_NE(r.err.find("--weight-delays 0,1,5 with 3 micro-batches run as 0,1,3: "),
            std::string::npos)
      << r.err;
}

TEST(PlanCli, ASingleStagePlanTrainsThePlainModel) {
  // Restricted to one device, the only answer is the plain model, which train runs as one stage.
  const std::string dir = fresh_dir("plan_one_device");
  const std::string profile = profile_at_three_sizes(dir);
  CliResult r = run_pipebal("plan " + profile + " --devices 1 --chunks 1 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the plain model is predicted fastest on one device (a pipeline needs "
                       "--devices 2 or more)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("use the devices"), std::string::npos) << r.out;
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 1 --warmup-steps 0 -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(dir + "/run.json"))["balance"], json({5}));
}

}  // namespace
}  // namespace pipebal::testing
