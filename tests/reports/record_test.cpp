// The run and validation documents read back into the records that wrote them, and a bad field
// is one line naming the file and its path.
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "pipebal/reports/run_record.h"
#include "pipebal/reports/validation_record.h"

namespace pipebal::reports {
namespace {

using nlohmann::json;

pipeline::Timeline two_actions() {
  pipeline::Timeline timeline(2);
  timeline[0] = {0, {pipeline::ActionKind::kForward, 0}, 0.0, 1.5};
  timeline[1] = {1, {pipeline::ActionKind::kBackward, 3}, 1.5, 4.0};
  return timeline;
}

ValidationRecord validation_example() {
  ValidationRecord record;
  record.model = "mlp:layers=4";
  record.input_shape = {32, 8};
  record.stages = 2;
  record.chunks = 4;
  record.schedule = "1f1b";
  record.checkpoint = "never";
  record.steps = 5;
  Candidate c;
  c.algorithms = {"dp", "heuristic"};
  c.balance = {3, 1};
  c.bottleneck_ms = 2.5;
  c.predicted = {10, 16, {2.5, 2.0}, {1000, 2000}, two_actions()};
  c.measured = {12, 18, {9.0, 8.0}, {1500, -1}, two_actions()};
  record.candidates = {c};
  record.environment = {{"host", "box"}};
  return record;
}

void expect_same(const Estimate& a, const Estimate& b) {
  EXPECT_EQ(a.step_ms, b.step_ms);
  EXPECT_EQ(a.naive_step_ms, b.naive_step_ms);
  EXPECT_EQ(a.stage_ms, b.stage_ms);
  EXPECT_EQ(a.stage_bytes, b.stage_bytes);
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    EXPECT_EQ(a.timeline[i].stage, b.timeline[i].stage);
    EXPECT_TRUE(a.timeline[i].action == b.timeline[i].action);
    EXPECT_EQ(a.timeline[i].start_ms, b.timeline[i].start_ms);
    EXPECT_EQ(a.timeline[i].end_ms, b.timeline[i].end_ms);
  }
}

TEST(ValidationRecord, ReadsBackWhatItWrote) {
  const ValidationRecord written = validation_example();
  const ValidationRecord read =
      validation_from_json(json::parse(validation_to_json(written).dump()));
  EXPECT_EQ(read.model, written.model);
  EXPECT_EQ(read.input_shape, written.input_shape);
  EXPECT_EQ(read.stages, 2);
  EXPECT_EQ(read.chunks, 4);
  EXPECT_EQ(read.schedule, "1f1b");
  EXPECT_EQ(read.checkpoint, "never");
  EXPECT_EQ(read.steps, 5);
  ASSERT_EQ(read.candidates.size(), 1u);
  EXPECT_EQ(read.candidates[0].algorithms, written.candidates[0].algorithms);
  EXPECT_EQ(read.candidates[0].balance, written.candidates[0].balance);
  EXPECT_EQ(read.candidates[0].bottleneck_ms, 2.5);
  expect_same(read.candidates[0].predicted, written.candidates[0].predicted);
  expect_same(read.candidates[0].measured, written.candidates[0].measured);
  EXPECT_EQ(read.environment, written.environment);
}

std::string error_of(const json& doc) {
  try {
    validation_from_json(doc, "v.json");
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ValidationRecord, ABadFieldIsOneLineNamingFileAndPath) {
  const json good = validation_to_json(validation_example());
  json doc = good;
  doc["candidates"][0]["measured"]["step_ms"] = "fast";
  EXPECT_EQ(error_of(doc), "v.json: candidates[0].measured.step_ms must be a number, not string");
  doc = good;
  // A stage the candidate's balance does not have (a report would draw a row for each index).
  doc["candidates"][0]["predicted"]["timeline"][1]["stage"] = 2;
  EXPECT_EQ(error_of(doc),
            "v.json: candidates[0].predicted.timeline[1].stage is 2, expected 0 to 1");
  doc = good;
  doc["candidates"][0]["predicted"]["timeline"][0]["action"] = "X";
  EXPECT_NE(error_of(doc).find("v.json: candidates[0].predicted.timeline[0].action"),
            std::string::npos)
      << error_of(doc);
  doc = good;
  doc["candidates"][0]["predicted"]["timeline"][1]["end_ms"] = 0.5;  // before its start
  EXPECT_NE(error_of(doc).find("timeline[1].end_ms is 0.5"), std::string::npos) << error_of(doc);
  // Times a chart would scale by are bounded as a profile's layer times are (1.79e308 drew inf).
  doc = good;
  doc["candidates"][0]["measured"]["stage_busy_ms"][0] = 1.79e308;
  EXPECT_EQ(error_of(doc),
            "v.json: candidates[0].measured.stage_busy_ms[0] is 1.79e+308 ms, "
            "expected 0 to 1e+12");
  doc = good;
  doc["candidates"][0]["predicted"]["timeline"][1]["end_ms"] = 2e12;
  EXPECT_EQ(error_of(doc),
            "v.json: candidates[0].predicted.timeline[1].end_ms is 2e+12 ms, "
            "expected 1.5 to 1e+12");
  doc = good;
  doc["candidates"][0]["measured"]["naive_step_ms"] = -1;
  EXPECT_EQ(error_of(doc),
            "v.json: candidates[0].measured.naive_step_ms is -1 ms, expected 0 to 1e+12");
  doc = good;
  doc["candidates"][0]["measured"]["naive_step_ms"] = nullptr;  // not measured: fine
  EXPECT_EQ(error_of(doc), "(no error)");
  doc = good;
  doc["candidates"][0].erase("measured");
  EXPECT_EQ(error_of(doc), "v.json: missing \"candidates[0].measured\"");
  doc = good;
  doc["schema"] = "pipebal.validation/2";
  EXPECT_NE(error_of(doc).find("v.json: "), std::string::npos);
  EXPECT_NE(error_of(doc).find("pipebal.validation/2"), std::string::npos);
}

RunRecord run_example() {
  RunRecord run;
  run.model = "mlp:layers=4";
  run.input_shape = {32, 8};
  run.balance = {3, 1};
  run.devices = {"cpu", "cpu"};
  run.chunks = 4;
  run.schedule = "gpipe";
  run.checkpoint = "except_last";
  run.threads_per_stage = 2;
  run.optimizer = "sgd";
  run.lr = 0.01;
  run.seed = 3;
  run.warmup_steps = 1;
  run.steps = {{0, 5.0, 2.5}, {1, 4.0, std::nan("")}};
  run.median_step_ms = 4.5;
  run.p10_step_ms = 4.0;
  run.p90_step_ms = 5.0;
  run.samples_per_s = 7000;
  run.stages = {{0, 0, 3, 3.5, 0.8, 4096}, {1, 3, 1, 1.0, 0.2, -1}};
  run.timeline = two_actions();
  // Two processes: what rank 1 could not measure is unknown.
  run.processes.resize(2);
  run.processes[0].peak_rss_bytes = 1 << 20;
  run.processes[0].cpu_seconds = 1.25;
  run.processes[1].rank = 1;
  run.processes[1].stage = 1;
  return run;
}

TEST(ValidationRecord, RanksByTimeWithTiesInTheGivenOrder) {
  EXPECT_EQ(ranks_by_time({3.0, 1.0, 2.0}), (std::vector<int>{3, 1, 2}));
  // Equal to the nanosecond: the same costs summed in another order.
  EXPECT_EQ(ranks_by_time({1.0 + 1e-12, 1.0, 0.5}), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(ranks_by_time({1.0, 1.0 + 2e-6}), (std::vector<int>{1, 2}));
  EXPECT_EQ(ranks_by_time({1.0 + 2e-6, 1.0}), (std::vector<int>{2, 1}));
  EXPECT_TRUE(ranks_by_time({}).empty());
}

TEST(ValidationRecord, MedianRatioByRoundPairsTheStepsOfOneRound) {
  // a is 10% or 20% slower than b in two of three rounds; its median step (120) is below b's (125)
  // only because b's one slow step fell in the round the machine was fastest.
  const std::vector<double> a = {120, 220, 100};
  const std::vector<double> b = {100, 200, 125};
  EXPECT_NEAR(median_ratio_by_round(a, b), 1.1, 1e-12);
  EXPECT_NEAR(median_ratio_by_round(b, a), 1 / 1.1, 1e-12);
  // An even count of rounds takes the mean of the middle two; rounds past the shorter list and
  // steps that were not measured (0) are left out.
  EXPECT_NEAR(median_ratio_by_round({2, 3, 0, 9}, {1, 1, 1}), 2.5, 1e-12);
  EXPECT_TRUE(std::isnan(median_ratio_by_round({}, {1})));
  EXPECT_TRUE(std::isnan(median_ratio_by_round({0}, {1})));
}

TEST(RunRecord, ReadsBackWhatItWroteAndOlderDocumentsWithDefaults) {
  const RunRecord read = run_from_json(json::parse(run_to_json(run_example()).dump()));
  EXPECT_EQ(read.balance, (std::vector<int>{3, 1}));
  EXPECT_EQ(read.threads_per_stage, 2);
  EXPECT_EQ(read.lr, 0.01);
  ASSERT_EQ(read.steps.size(), 2u);
  EXPECT_EQ(read.steps[0].loss, 2.5);
  EXPECT_TRUE(std::isnan(read.steps[1].loss)) << "a NaN loss is written as null and read as NaN";
  ASSERT_EQ(read.stages.size(), 2u);
  EXPECT_EQ(read.stages[0].peak_memory_bytes, 4096);
  EXPECT_EQ(read.stages[1].peak_memory_bytes, -1);
  EXPECT_EQ(read.timeline.size(), 2u);
  ASSERT_EQ(read.processes.size(), 2u);
  EXPECT_EQ(read.processes[0].peak_rss_bytes, 1 << 20);
  EXPECT_EQ(read.processes[0].cpu_seconds, 1.25);
  EXPECT_EQ(read.processes[1].peak_rss_bytes, -1);
  EXPECT_EQ(read.processes[1].cpu_seconds, -1);

  // What earlier writers of pipebal.run/1 left out reads as its default.
  json older = run_to_json(run_example());
  older["processes"][0].erase("cpu_seconds");
  for (const char* key : {"threads_per_stage", "optimizer", "lr", "seed", "warmup_steps",
                          "p10_step_ms", "p90_step_ms", "devices", "timeline"}) {
    older.erase(key);
  }
  const RunRecord old = run_from_json(older, "run.json");
  EXPECT_EQ(old.threads_per_stage, 1);
  EXPECT_TRUE(std::isnan(old.lr));
  EXPECT_TRUE(old.timeline.empty());
  EXPECT_EQ(old.median_step_ms, 4.5);
  EXPECT_EQ(old.processes[0].cpu_seconds, -1);

  json bad = run_to_json(run_example());
  bad["stages"][1]["peak_memory_bytes"] = -7;
  try {
    run_from_json(bad, "run.json");
    ADD_FAILURE() << "accepted a negative peak";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "run.json: stages[1].peak_memory_bytes is -7, expected 0 to 9223372036854775807");
  }
  const auto run_error = [](const json& doc) -> std::string {
    try {
      run_from_json(doc, "run.json");
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "(no error)";
  };
  for (const auto& [path, value, error] :
       {std::tuple{"/steps/0/ms", 1e13, "steps[0].ms is 1e+13 ms, expected 0 to 1e+12"},
        std::tuple{"/stages/0/busy_ms", 1.79e308,
                   "stages[0].busy_ms is 1.79e+308 ms, expected 0 to 1e+12"},
        std::tuple{"/median_step_ms", -3.0, "median_step_ms is -3 ms, expected 0 to 1e+12"},
        std::tuple{"/timeline/0/start_ms", -2e12,
                   "timeline[0].start_ms is -2e+12 ms, expected -1e+12 to 1e+12"},
        // Stages of the balance [3, 1] only: a report draws a row for each index it meets.
        std::tuple{"/timeline/0/stage", 2.0, "timeline[0].stage is 2, expected 0 to 1"},
        std::tuple{"/stages/1/index", 2.0, "stages[1].index is 2, expected 0 to 1"}}) {
    bad = run_to_json(run_example());
    bad[json::json_pointer(path)] = value;
    EXPECT_EQ(run_error(bad), std::string("run.json: ") + error);
  }
  bad = run_to_json(run_example());
  bad["timeline"][0]["start_ms"] = -0.25;  // a rank's aligned clock may start before rank 0's
  EXPECT_EQ(run_error(bad), "(no error)");
}

}  // namespace
}  // namespace pipebal::reports
