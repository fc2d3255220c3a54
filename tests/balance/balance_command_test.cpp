// `pipebal balance` end to end, in process: the table, --compare, --json, -o and bad input (and
// `pipebal plan`'s table head).
#include "tools/balance_command.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "tests/support/scratch_dir.h"

#include "pipebal/balance/plan.h"
#include "tools/plan_command.h"

namespace pipebal::tools {
namespace {

using nlohmann::json;

std::string write_profile() {
  json layers = json::array();
  for (int i = 0; i < 8; ++i) {
    layers.push_back({{"name", "layer" + std::to_string(i)},
                      {"type", "Linear"},
                      {"forward_ms", 1.0 + i % 3},
                      {"backward_ms", 2.0 + i % 3},
                      {"param_bytes", 1 << 20},
                      {"activation_bytes", 1 << 18},
                      {"output_bytes", 1 << 16}});
  }
  const std::string path = pipebal::testing::scratch_path("profile.json");
  std::ofstream(path) << json{
      {"schema", "pipebal.profile/1"},
      {"model", "toy"},
      {"layers", layers}}.dump();
  return path;
}

BalanceParams params_for(int stages) {
  BalanceParams params;
  params.profile_path = write_profile();
  params.stages = stages;
  return params;
}

std::string run(const BalanceParams& params, std::string* warnings = nullptr) {
  std::ostringstream out, warned;
  run_balance(params, out, warned);
  if (warnings != nullptr) *warnings = warned.str();
  return out.str();
}

// A profile measured while the machine was busy gives a plan for that machine: balance says so,
// and says nothing of an idle one's.
TEST(BalanceCommand, WarnsOfAProfileMeasuredOnABusyMachine) {
  BalanceParams params = params_for(2);
  json doc = json::parse(std::ifstream(params.profile_path));
  const auto with_load = [&](double others_cores) {
    doc["environment"]["machine_load"] = {
        {"seconds", 4.0}, {"cores", 2}, {"others_cores", others_cores}, {"steal_cores", 0.0}};
    std::ofstream(params.profile_path) << doc.dump();
    std::string warnings;
    run(params, &warnings);
    return warnings;
  };
  EXPECT_EQ(
      with_load(1.5),
      "pipebal: warning: " + params.profile_path +
          " was measured while the machine was busy (other processes took 1.50 of the 2 "
          "cores pipebal runs on, on average over 4.0 s): its times, and a plan from them, fit "
          "that machine; profile again on an idle one\n");
  EXPECT_EQ(with_load(0.1), "");
  // A path's control characters are escaped: one warning, one line, no escape sequence.
  params.profile_path = pipebal::testing::scratch_path("new\nline\x1b.json");
  EXPECT_EQ(with_load(1.5).rfind("pipebal: warning: " + pipebal::testing::scratch_dir() +
                                     "/new\\nline\\x1b.json was measured while the machine was "
                                     "busy",
                                 0),
            0u);
}

// Micro-batches pay the link's latency each: over a slow link, four lose to one, and balance says
// so on the warning stream (the table and the plan are unchanged).
TEST(BalanceCommand, WarnsWhenPipeliningIsPredictedToLose) {
  std::string warnings;
  run(params_for(2), &warnings);
  EXPECT_EQ(warnings, "") << "compute-bound: pipelining wins";

  json doc = json::parse(std::ifstream(write_profile()));
  doc["link"] = {{"latency_ms", 100.0}, {"bandwidth_bytes_per_ms", 1e9}};
  const std::string slow = pipebal::testing::scratch_path("slow-link.json");
  std::ofstream(slow) << doc.dump();
  BalanceParams params = params_for(2);
  params.profile_path = slow;
  params.chunks = 4;
  const std::string table = run(params, &warnings);
  EXPECT_NE(warnings.find("pipebal: warning: 4 micro-batches are predicted slower than 1"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  EXPECT_NE(table.find("speed-up 0."), std::string::npos) << table;
  // A rank of a launched run says whose warning it is, as its errors do.
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  run(params, &warnings);
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  EXPECT_EQ(warnings.rfind("pipebal: warning: rank 1: 4 micro-batches are predicted slower", 0), 0u)
      << warnings;
}

// A profile of 4 layers measured at 16 and 64 samples per micro-batch (4 micro-batches of a
// mini-batch of 64): forward fixed_ms + per_sample_ms per sample, backward twice that.
std::string write_sized_profile(double fixed_ms, double per_sample_ms) {
  const auto layers_at = [&](int64_t size) {
    json layers = json::array();
    for (int i = 0; i < 4; ++i) {
      const double forward_ms = fixed_ms + per_sample_ms * double(size);
      layers.push_back({{"name", "layer" + std::to_string(i)},
                        {"forward_ms", forward_ms},
                        {"backward_ms", 2 * forward_ms},
                        {"param_bytes", 1024},
                        {"activation_bytes", 64 * size},
                        {"output_bytes", 8 * size}});
    }
    return layers;
  };
  const std::string path = pipebal::testing::scratch_path("sized.json");
  std::ofstream(path) << json{{"model", "toy"},
                              {"batch_size", 16},
                              {"chunks", 4},
                              {"input_shape", {64, 8}},
                              {"layers", layers_at(16)},
                              {"sizes",
                               {{{"micro_batch_size", 16}, {"layers", layers_at(16)}},
                                {{"micro_batch_size", 64}, {"layers", layers_at(64)}}}}}
                             .dump();
  return path;
}

// Where a call costs 5 ms whatever its size, four small micro-batches lose to the whole batch as
// one, priced at the costs measured at 64 samples (2 x 2 x (5.64 + 11.28) = 67.68 ms), not at
// four times those of 16 (247.68 ms, which would call pipelining a gain).
TEST(BalanceCommand, WarnsWhenMicroBatchesLoseToTheWholeBatchAtItsMeasuredCosts) {
  BalanceParams params = params_for(2);
  params.profile_path = write_sized_profile(5.0, 0.01);
  std::string warnings;
  params.json = true;
  const json plan = json::parse(run(params, &warnings));
  EXPECT_NEAR(plan["prediction"]["naive_step_ms"].get<double>(), 67.68, 1e-9);
  EXPECT_NE(warnings.find("pipebal: warning: 4 micro-batches are predicted slower than 1 on this "
                          "balance (185.760 ms vs 67.680 ms, 0.36x)"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  // With one micro-batch it is the plain model's cost split over two devices: no warning.
  params.chunks = 1;
  run(params, &warnings);
  EXPECT_EQ(warnings, "");
}

// Costs in proportion to the samples, a second device half as fast: pipelining beats the whole
// batch on this balance but not the plain model on the first device alone, and the warning
// names what `pipebal plan` would run.
TEST(BalanceCommand, WarnsWhenSlowerThanThePlainModelAndSaysWhatIsFaster) {
  BalanceParams params = params_for(2);
  params.profile_path = write_sized_profile(0.0, 0.1);
  params.devices.device_speeds = {1.0, 0.5};
  std::string warnings;
  run(params, &warnings);
  EXPECT_NE(warnings.find("pipebal: warning: this plan is predicted slower than the plain model "
                          "on one device (81.600 ms vs 76.800 ms)"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("`pipebal plan --devices 2` predicts 62.400 ms for 2 stages"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  // A zb-h1 plan with its W delays is weighed the same way (the planner's search, of gpipe and
  // 1f1b, leaves the delays out), here on a second device a quarter as fast.
  params.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  params.weight_delays = "0,0";
  params.devices.device_speeds = {1.0, 0.25};
  run(params, &warnings);
  EXPECT_EQ(warnings.rfind("pipebal: warning: this plan is predicted slower than the plain model "
                           "on one device (110.400 ms vs 76.800 ms)",
                           0),
            0u)
      << warnings;
  EXPECT_NE(warnings.find("`pipebal plan --devices 2` predicts 76.800 ms for 1 stage"),
            std::string::npos)
      << warnings;
}

// `pipebal balance` and `plan` print the model's name, from a file a user may have edited, with
// its control characters escaped: no escape sequence reaches the terminal, and the table's head is
// one line.
TEST(BalanceCommand, PrintsTheModelsNameWithItsControlCharactersEscaped) {
  BalanceParams params = params_for(2);
  json doc = json::parse(std::ifstream(params.profile_path));
  doc["model"] = "odd\n\x1b[31mname";
  std::ofstream(params.profile_path) << doc.dump();
  const std::string out = run(params);
  EXPECT_EQ(out.rfind("odd\\n\\x1b[31mname: 8 layers into 2 stages", 0), 0u) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
}

TEST(PlanCommand, PrintsTheModelsNameWithItsControlCharactersEscaped) {
  PlanParams params;
  params.profile_path = write_sized_profile(0.0, 0.1);
  json doc = json::parse(std::ifstream(params.profile_path));
  doc["model"] = "odd\n\x1b[31mname";
  std::ofstream(params.profile_path) << doc.dump();
  params.devices = 2;
  params.quiet = true;
  std::ostringstream out;
  run_plan(params, out);
  EXPECT_EQ(out.str().rfind("odd\\n\\x1b[31mname: 4 layers", 0), 0u) << out.str();
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

// One stage measured at one micro-batch size: checkpointing makes 4 micro-batches slower than 1,
// and the best `pipebal plan` finds at that size (no checkpointing) only equals 1 micro-batch, so
// it is not offered as faster; the advice does not ask for fewer than one stage.
TEST(BalanceCommand, NamesAPlannedConfigurationOnlyWhenItBeatsWhatTheWarningCompared) {
  json layers = json::array();
  for (int i = 0; i < 4; ++i) {
    layers.push_back({{"name", "layer" + std::to_string(i)},
                      {"forward_ms", 5.0},
                      {"backward_ms", 10.0},
                      {"param_bytes", 1024},
                      {"activation_bytes", 1024},
                      {"output_bytes", 128}});
  }
  const std::string path = pipebal::testing::scratch_path("one-size.json");
  std::ofstream(path) << json{
      {"model", "toy"},
      {"batch_size", 16},
      {"chunks", 4},
      {"input_shape", {64, 8}},
      {"layers", layers}}.dump();
  BalanceParams params = params_for(1);
  params.profile_path = path;
  std::string warnings;
  const std::string table = run(params, &warnings);
  EXPECT_NE(table.find("toy: 4 layers into 1 stage: gpipe schedule, 4 micro-batches"),
            std::string::npos)
      << table;
  EXPECT_NE(warnings.find("4 micro-batches are predicted slower than 1 on this balance "
                          "(300.000 ms vs 240.000 ms, 0.80x)"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("; train with 1 micro-batch (profile with --chunks 1)\n"),
            std::string::npos)
      << warnings;
}

// A hand-written profile that does not say its micro-batch count is planned for the count that
// gives the size it measured; where no count gives it, other sizes are scaled from it, and the
// plan says so instead of passing the scaled costs off as measured.
TEST(BalanceCommand, SaysWhenCostsAreScaledFromAnotherMicroBatchSize) {
  BalanceParams params = params_for(2);
  json doc = json::parse(std::ifstream(params.profile_path));
  doc["batch_size"] = 16;
  doc["input_shape"] = {32, 8};
  std::ofstream(params.profile_path) << doc.dump();
  params.json = true;
  EXPECT_EQ(json::parse(run(params))["chunks"], 2);
  params.json = false;
  params.chunks = 4;
  try {
    run(params);
    ADD_FAILURE() << "planned 4 micro-batches of 8 from costs measured at 16";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("--chunks 4 means micro-batches of 8"),
              std::string::npos)
        << error.what();
  }
  doc["input_shape"] = {30, 8};  // no count cuts 30 samples into micro-batches of 16
  std::ofstream(params.profile_path) << doc.dump();
  EXPECT_NE(run(params).find("costs at 8 samples per micro-batch: extrapolated in proportion "
                             "from the profiled 16"),
            std::string::npos);
}

// zb-h1 under a cap that W right after B exceeds (the first layer's backward peak beside the
// second's new gradients: 4100 bytes) but a whole backward keeps (3100): balanced and planned
// with the backward whole, and a cap below that names 3100 as the smallest, not 4100.
TEST(BalanceCommand, ZeroBubbleFitsACapWithItsBackwardWholeWhereASplitOneWouldNot) {
  const std::string path = pipebal::testing::scratch_path("zb.json");
  std::ofstream(path) << json{{"model", "toy"},
                              {"layers",
                               {{{"name", "a"},
                                 {"forward_ms", 1.0},
                                 {"backward_ms", 1.0},
                                 {"param_bytes", 0},
                                 {"activation_bytes", 100},
                                 {"output_bytes", 10},
                                 {"backward_peak_bytes", 1000}},
                                {{"name", "b"},
                                 {"forward_ms", 1.0},
                                 {"backward_ms", 1.0},
                                 {"param_bytes", 1000},
                                 {"activation_bytes", 100},
                                 {"output_bytes", 10},
                                 {"backward_peak_bytes", 100}}}}}
                             .dump();
  BalanceParams params = params_for(1);
  params.profile_path = path;
  params.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  params.devices.memory_caps = {"3500"};
  params.json = true;
  const json plan = json::parse(run(params));
  EXPECT_EQ(plan["weight_delays"], json::array({-1}));
  EXPECT_EQ(plan["stages"][0]["memory_bytes"], 3100);
  params.devices.memory_caps = {"3000"};
  try {
    run(params);
    ADD_FAILURE() << "planned within 3000 bytes";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what())
                  .find("the smallest cap that would work on every stage is "
                        "3.03 KiB (3100 bytes)"),
              std::string::npos)
        << error.what();
  }
}

TEST(BalanceCommand, PrintsTheStageTableAndThePrediction) {
  const std::string out = run(params_for(3));
  EXPECT_NE(out.find("toy: 8 layers into 3 stages: gpipe schedule, 4 micro-batches"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("algorithm dp"), std::string::npos) << out;
  EXPECT_NE(out.find("bottleneck"), std::string::npos) << out;
  EXPECT_NE(out.find("predicted step"), std::string::npos) << out;
  EXPECT_NE(out.find("100.0%"), std::string::npos) << out;
}

TEST(BalanceCommand, CompareListsEveryAlgorithm) {
  BalanceParams params = params_for(3);
  params.compare = true;
  const std::string out = run(params);
  for (const std::string name : {"dp", "blockpartition", "uniform", "parameters"}) {
    EXPECT_NE(out.find("\n" + name + " "), std::string::npos) << name << "\n" << out;
  }
}

// The step printed in `out`'s row starting with `name`.
double step_of(const std::string& out, const std::string& name) {
  const size_t row = out.find("\n" + name + " ");
  if (row == std::string::npos) return -1;
  std::istringstream fields(out.substr(row + name.size() + 1));
  int stages = 0;
  double step = -1;
  fields >> stages >> step;
  return step;
}

// The same two devices under every schedule: interleaving two or three stages per device
// shrinks the bubble, so its best balance beats 1F1B's; a shape a schedule cannot run says why.
TEST(BalanceCommand, CompareListsEverySchedule) {
  BalanceParams params = params_for(2);
  params.compare = true;
  const std::string out = run(params);
  const double gpipe = step_of(out, "gpipe"), one = step_of(out, "1f1b");
  const double two = step_of(out, "interleaved 2"), three = step_of(out, "interleaved 3");
  EXPECT_GT(gpipe, 0) << out;
  EXPECT_GT(one, 0) << out;
  EXPECT_GT(two, 0) << out;
  EXPECT_LT(two, one) << out;
  EXPECT_LT(three, one) << out;
  params = params_for(3);
  params.compare = true;
  const std::string odd = run(params);
  EXPECT_NE(odd.find("\ninterleaved 2   schedule: interleaved needs the micro-batches (4) to be "
                     "a multiple of the devices (3)"),
            std::string::npos)
      << odd;
  EXPECT_NE(odd.find("\ninterleaved 3   9 stages need at least 9 layers"), std::string::npos)
      << odd;
}

TEST(BalanceCommand, JsonAndOutputFileCarryThePlan) {
  BalanceParams params = params_for(2);
  params.json = true;
  params.output_path = pipebal::testing::scratch_path("plan.json");
  params.devices.memory_caps = {"8M", "16M"};
  params.devices.device_speeds = {1.0, 2.0};
  params.devices.bandwidth = "1GB/s";
  const json doc = json::parse(run(params));
  EXPECT_EQ(doc["schema"], "pipebal.plan/1");
  EXPECT_EQ(doc["stages"][1]["memory_cap_bytes"], 16 << 20);
  EXPECT_EQ(doc["stages"][1]["speed"], 2.0);
  EXPECT_EQ(doc["bandwidth_bytes_per_ms"], 1e6);
  EXPECT_EQ(balance::read_plan(params.output_path).balance, doc["balance"].get<std::vector<int>>());
}

// Checkpointed outputs of 1 MiB over a link that takes half a forward: at the end of each
// forward one is on its way from stage 0, whose peak moves from a recomputation's activations
// (2 KiB) to that output; the table's memory counts it, a line names what it adds, the plan
// carries both peaks.
TEST(BalanceCommand, MemoryCountsTheMessagesWaitingForTheirReceiver) {
  json layers = json::array();
  for (int i = 0; i < 4; ++i) {
    layers.push_back({{"name", "layer" + std::to_string(i)},
                      {"type", "Linear"},
                      {"forward_ms", 1.0},
                      {"backward_ms", 2.0},
                      {"param_bytes", 1 << 10},
                      {"activation_bytes", 1 << 10},
                      {"output_bytes", 1 << 20}});
  }
  BalanceParams params;
  params.profile_path = pipebal::testing::scratch_path("big-outputs.json");
  std::ofstream(params.profile_path)
      << json{{"schema", "pipebal.profile/1"}, {"model", "toy"}, {"layers", layers}}.dump();
  params.stages = 2;
  params.chunks = 4;
  params.checkpoint = pipeline::CheckpointMode::kAlways;
  params.devices.bandwidth = "1GB/s";
  const std::string out = run(params);
  EXPECT_NE(out.find("memory includes the messages a stage sent that wait for their receiver: "
                     "stage 0 1022.00 KiB\n"),
            std::string::npos)
      << out;
  params.json = true;
  const json doc = json::parse(run(params));
  EXPECT_EQ(doc["stages"][0]["timed_memory_bytes"].get<int64_t>() -
                doc["stages"][0]["memory_bytes"].get<int64_t>(),
            (1 << 20) - 2 * (1 << 10));
  EXPECT_EQ(doc["stages"][1]["timed_memory_bytes"], doc["stages"][1]["memory_bytes"]);
}

// --balance costs and simulates the user's partition: dp's own balance given back predicts
// exactly dp's step, any other a slower one (dp is optimal), each stage timed by its layers.
TEST(BalanceCommand, AGivenBalanceIsCostedAndSimulatedAsIs) {
  BalanceParams params = params_for(2);
  params.json = true;
  const json dp = json::parse(run(params));
  const auto dp_balance = dp["balance"].get<std::vector<int>>();
  params.balance = fmt::format("{},{}", dp_balance[0], dp_balance[1]);
  const json same = json::parse(run(params));
  EXPECT_EQ(same["algorithm"], "given");
  EXPECT_EQ(same["balance"], dp["balance"]);
  EXPECT_DOUBLE_EQ(same["prediction"]["step_ms"].get<double>(),
                   dp["prediction"]["step_ms"].get<double>());
  params.balance = "1,7";
  const json lopsided = json::parse(run(params));
  EXPECT_EQ(lopsided["balance"], json::array({1, 7}));
  EXPECT_GT(lopsided["prediction"]["step_ms"].get<double>(),
            dp["prediction"]["step_ms"].get<double>());
  // Stage 1 holds layers 1-7: its time is theirs, stage 0's is layer 0's alone.
  EXPECT_GT(lopsided["stages"][1]["time_ms"].get<double>(),
            6 * lopsided["stages"][0]["time_ms"].get<double>());
}

TEST(BalanceCommand, ParsesItsOptionsAndShowsAnExampleInHelp) {
  CLI::App app;
  add_balance_command(app);
  CLI::App* sub = app.get_subcommand("balance");
  EXPECT_NE(sub->help().find("Example"), std::string::npos);
  EXPECT_NE(sub->help().find("except_last"), std::string::npos);
  // A bad value is refused while parsing, with the library's own message, before any work.
  try {
    app.parse("balance " + write_profile() + " --stages 2 --schedule zigzag", false);
    ADD_FAILURE() << "--schedule zigzag was accepted";
  } catch (const CLI::ValidationError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("unknown schedule 'zigzag' (valid: gpipe, 1f1b, interleaved, zb-h1)"),
              std::string::npos)
        << error.what();
  }
}

TEST(BalanceCommand, BadInputThrowsOneClearMessage) {
  auto expect_error = [](const BalanceParams& params, const std::string& message) {
    try {
      run(params);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const std::exception& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
    }
  };
  BalanceParams params = params_for(9);
  expect_error(params, "9 stages need at least 9 layers, the profile has 8");
  params = params_for(2);
  params.devices.memory_cap = "1K";
  expect_error(params, "the smallest cap that would work on every stage is");
  params.devices.memory_caps = {"1G"};
  expect_error(params, "either --memory-cap or --memory-caps");
  // Interleaved, a device's stages share its cap and speed: one value per device, not per stage.
  params = params_for(2);
  params.schedule = pipeline::ScheduleKind::kInterleaved;
  params.virtual_stages = 2;
  params.devices.memory_caps = {"1G", "1G", "1G", "3000"};
  expect_error(params,
               "--memory-caps: 4 values for 2 devices (give one for every device or one "
               "per device)");
  params.devices.memory_caps = {};
  params.devices.device_speeds = {1, 1, 1};
  expect_error(params, "--device-speeds: 3 values for 2 devices");
  // Nothing fits: the cap suggested is one the device's stages fit together.
  params.devices.device_speeds = {};
  params.devices.memory_cap = "1K";
  expect_error(params, "the smallest cap on every device that one fits is");
  params = params_for(2);
  params.devices.memory_cap = "lots";
  expect_error(params, "cannot read byte size 'lots'");
  params = params_for(2);
  params.algorithm = "greedy";
  expect_error(params, "unknown algorithm 'greedy'");
  params = params_for(2);
  params.devices.device_speeds = {1, -1};
  expect_error(params, "device 1's speed is -1");
  params = params_for(2);
  params.balance = "4,5";
  expect_error(params, "sums to 9, but the model has 8 layers");
  params.balance = "4,x";
  expect_error(params, "balance '4,x': expected layer counts separated by commas");
  params = params_for(2);
  params.profile_path = "/nonexistent.json";
  expect_error(params, "cannot read '/nonexistent.json'");
}

// A split point names the layer that begins a stage: a name several layers share is refused
// before any plan is written, and a name with quotes is a valid Python string.
TEST(BalanceCommand, PippySplitPointsNameOneLayerEach) {
  BalanceParams params = params_for(2);
  params.format = "pippy";
  params.balance = "4,4";
  json profile = json::parse(std::ifstream(params.profile_path));
  profile["layers"][4]["name"] = "blocks.\"0\"";
  std::ofstream(params.profile_path) << profile.dump();
  EXPECT_EQ(run(params), "split_spec = {\"blocks.\\\"0\\\"\": SplitPoint.BEGINNING}\n");
  profile["layers"][1]["name"] = "blocks.\"0\"";
  std::ofstream(params.profile_path) << profile.dump();
  params.output_path = pipebal::testing::scratch_path("pippy-plan.json");
  try {
    run(params);
    ADD_FAILURE() << "accepted an ambiguous split point";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "stage 1 begins at layer 4, \"blocks.\"0\"\", but 2 layers have that name: a split "
              "point must name one layer (give the profile's layers distinct names)");
  }
  EXPECT_FALSE(std::ifstream(params.output_path).good()) << "a plan was written";
  params.format = "torchgpipe";  // a balance list names no layer
  EXPECT_EQ(run(params), "balance = [4, 4]\n");
}

// The refusal is the one line said: no warning before it, though this plan has one (over a slow
// link 4 micro-batches lose), which a format that can name the balance gives.
TEST(BalanceCommand, APippyRefusalIsNotPrecededByWarnings) {
  BalanceParams params = params_for(2);
  json profile = json::parse(std::ifstream(params.profile_path));
  for (json& layer : profile["layers"]) layer["name"] = "block";
  profile["link"] = {{"latency_ms", 100.0}, {"bandwidth_bytes_per_ms", 1e9}};
  std::ofstream(params.profile_path) << profile.dump();
  params.chunks = 4;
  params.format = "pippy";
  std::ostringstream out, warned;
  EXPECT_THROW(run_balance(params, out, warned), std::invalid_argument);
  EXPECT_EQ(warned.str(), "");
  params.format = "torchgpipe";
  std::string warnings;
  run(params, &warnings);
  EXPECT_NE(warnings.find("predicted slower"), std::string::npos) << warnings;
}

}  // namespace
}  // namespace pipebal::tools
