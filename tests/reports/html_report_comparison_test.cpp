// The report of a comparison (`validate --plans`, `validate --auto`): rendered with or without a
// profile, refused beside documents of another model, and every bad field named.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipebal/common/atomic_file.h"
#include "pipebal/reports/html_report.h"
#include "tests/reports/report_test_support.h"
#include "tests/support/scratch_dir.h"

namespace pipebal::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What `pipebal validate --plans` writes, by hand: two plans, the second profiled in turns.
json plans_comparison() {
  json first = {{"file", "gpipe.json"},
                {"schedule", "gpipe"},
                {"chunks", 4},
                {"checkpoint", "never"},
                {"balance", {3, 4}},
                {"predicted_step_ms", 151.0},
                {"measured_step_ms", 132.25},
                {"measured_steps_ms", {132.25, 140.0, 120.0}},
                {"step_error", 0.138},
                {"predicted_rank", 2},
                {"measured_rank", 2},
                {"predicted_device_bytes", {14 << 20, 3 << 20}},
                {"measured_device_bytes", {15 << 20, 2 << 20}}};
  json second = first;
  second["file"] = "zb-h1.json";
  second["schedule"] = "zb-h1";
  second["weight_delays"] = {0, 1};
  second["predicted_step_ms"] = 140.0;
  second["measured_step_ms"] = 120.5;
  second["predicted_in_turns_step_ms"] = 125.0;
  second["predicted_rank"] = 1;
  second["measured_rank"] = 1;
  return {{"schema", "pipebal.plans-comparison/1"},
          {"model", "gpt:layers=4"},
          {"input_shape", {64, 32}},
          {"plans", {first, second}},
          {"environment", {{"cpu_model", "Test CPU"}}}};
}

// A comparison beside a profile of another model is refused, as the other documents are.
TEST(HtmlReport, AComparisonOfAnotherModelThanItsProfileIsRefused) {
  ScratchDir dir("comparison_of_another_model");
  const std::string model = dir.read("profile.json")["model"];
  dir.write("plans-comparison.json", plans_comparison());
  EXPECT_EQ(error_of([&] { render_html_report(load_report_inputs(dir.path())); }),
            fmt::format("{}: model 'gpt:layers=4', but {} is of '{}': are they of the same model "
                        "and run?",
                        dir.file("plans-comparison.json"), dir.file("profile.json"), model));
}

TEST(HtmlReport, RendersAPlansComparisonWithoutAProfile) {
  const fs::path dir = pipebal::testing::fresh_dir("plans_comparison");
  write_file_atomically((dir / "plans-comparison.json").string(), plans_comparison().dump());
  const std::string html = render_html_report(load_report_inputs(dir.string()));
  EXPECT_NE(html.find("<h1>gpt:layers=4</h1>"), std::string::npos);
  EXPECT_NE(html.find("pipebal validate --plans"), std::string::npos);
  EXPECT_NE(html.find("Test CPU"), std::string::npos);  // the runs' environment
  // One row per plan, in order, its numbers as the document says; the measured fastest marked.
  EXPECT_NE(html.find("<td class=\"l\">#1</td><td class=\"l\">gpipe.json</td><td class=\"l\">"
                      "gpipe, 4 micro-batches, checkpoint never</td><td class=\"l\">[3, 4]</td>"
                      "<td>151</td><td>132</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr class=\"primary\"><td class=\"l\">#2</td><td class=\"l\">zb-h1.json"
                      "</td><td class=\"l\">zb-h1 (W delays 0,1), 4 micro-batches"),
            std::string::npos);
  EXPECT_NE(html.find("<td>2 / 2</td><td>14.00 MiB</td><td>15.00 MiB</td>"), std::string::npos);
  // The bars: predicted, in turns (where profiled so) and measured for each plan.
  EXPECT_NE(html.find("<title>#2: predicted in turns 125 ms</title>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<title>#1: predicted in turns"), std::string::npos);
  EXPECT_NE(html.find("<title>#1: measured 132 ms</title>"), std::string::npos);
  // Without a profile the layers are left out, said once; nothing else is called missing.
  EXPECT_NE(html.find("No profile: the layers are not drawn"), std::string::npos);
  EXPECT_EQ(html.find("validation.json is missing"), std::string::npos);
  EXPECT_EQ(html.find("run.json is missing"), std::string::npos);
  EXPECT_EQ(html.find("id=\"layers\""), std::string::npos);
}

TEST(HtmlReport, RendersAnAutoValidationBesideItsProfile) {
  ScratchDir dir("auto_validation");
  fs::remove(dir.file("validation.json"));
  fs::remove(dir.file("run.json"));
  const json configuration = {{"labels", {"plan 1", "plain, 2 threads"}},
                              {"stages", 1},
                              {"chunks", 1},
                              {"threads_per_stage", 2},
                              {"schedule", "gpipe"},
                              {"checkpoint", "never"},
                              {"balance", {12}},
                              {"predicted_step_ms", 55.0},
                              {"measured_step_ms", 50.5},
                              {"predicted_rank", 1},
                              {"measured_rank", 1}};
  json pipelined = configuration;
  pipelined["labels"] = {"plan 2"};
  pipelined["stages"] = 2;
  pipelined["chunks"] = 4;
  pipelined["threads_per_stage"] = 0;
  pipelined["schedule"] = "1f1b";
  pipelined["balance"] = {6, 6};
  pipelined["predicted_rank"] = 2;
  pipelined["measured_rank"] = 2;
  // The recommended configuration is plan.json's.
  const json plan = dir.read("plan.json");
  json recommended = pipelined;
  recommended["labels"] = {"recommended"};
  recommended["stages"] = plan["balance"].size();
  recommended["chunks"] = plan["chunks"];
  recommended["schedule"] = plan["schedule"];
  recommended["checkpoint"] = plan["checkpoint"];
  recommended["balance"] = plan["balance"];
  recommended["predicted_step_ms"] = plan["prediction"]["step_ms"];
  recommended["measured_step_ms"] = 80.0;
  recommended["predicted_rank"] = 3;
  recommended["measured_rank"] = 3;
  dir.write("plan-validation.json", {{"schema", "pipebal.plan-validation/1"},
                                     {"model", dir.read("profile.json")["model"]},
                                     {"input_shape", {64, 32}},
                                     {"devices", 2},
                                     {"searched", 30},
                                     {"configurations", {configuration, pipelined, recommended}}});
  const std::string html = render_html_report(load_report_inputs(dir.path()));
  EXPECT_NE(html.find("pipebal validate --auto"), std::string::npos);
  EXPECT_NE(html.find("plan 1, plain, 2 threads</td><td class=\"l\">the plain "
                      "model on 2 threads</td>"),
            std::string::npos)
      << html;
  // The plan's candidate row: its prediction and, from the comparison, its measurement.
  const size_t candidates = html.find("Candidates: predicted vs measured");
  ASSERT_NE(candidates, std::string::npos);
  const size_t row = html.find("[4, 5, 3]</td>", candidates);
  ASSERT_NE(row, std::string::npos) << html;
  const std::string measured =
      "[4, 5, 3]</td><td>73.2</td><td>80.0</td><td class=\"ok\" title=\"target: within "
      "15%\">-8.5%</td>";
  EXPECT_EQ(html.compare(row, measured.size(), measured), 0) << html.substr(row, 200);
  EXPECT_NE(html.find("2 stages, 4 micro-batches, 1f1b, checkpoint never"), std::string::npos);
  EXPECT_NE(html.find("id=\"layers\""), std::string::npos);  // the profile beside it
  EXPECT_EQ(html.find("validation.json is missing"), std::string::npos);

  // A configuration's shape must be one it could have trained.
  const auto refused = [&](const json& changed, const std::string& expected) {
    json doc = dir.read("plan-validation.json");
    doc["configurations"][1] = changed;
    dir.write("plan-validation.json", doc);
    const std::string why = error_of([&] { render_html_report(load_report_inputs(dir.path())); });
    EXPECT_NE(why.find("plan-validation.json: configurations[1]." + expected), std::string::npos)
        << why;
  };
  json changed = pipelined;
  changed["stages"] = 3;
  refused(changed, "balance has 2 stages for 3 stages of 1f1b");
  changed = pipelined;
  changed["threads_per_stage"] = -4;
  refused(changed, "threads_per_stage is -4, expected 0 to 4096");
  changed = pipelined;
  changed["checkpoint"] = "sometimes";
  refused(changed, "checkpoint is not valid:");
  changed = pipelined;
  changed["balance"] = {6, 7};
  refused(changed, "balance [6,7] covers 13 layers, but");
}

// The comparison fixtures (also the fuzzer's seeds) render, each in a directory of its own.
TEST(HtmlReport, ComparisonFixturesRender) {
  const std::string fixtures = PIPEBAL_FIXTURES_DIR "/../reports/fixtures/comparisons";
  for (const char* name : {"plans-comparison.json", "plan-validation.json"}) {
    const fs::path dir = pipebal::testing::fresh_dir(name);
    fs::copy_file(fs::path(fixtures) / name, dir / name);
    const json doc = json::parse(read_file((dir / name).string()));
    const std::string html = render_html_report(load_report_inputs(dir.string()));
    EXPECT_NE(html.find("Configurations trained side by side"), std::string::npos) << name;
    const json& rows = doc.contains("plans") ? doc["plans"] : doc["configurations"];
    EXPECT_EQ(count(html, "<td class=\"l\">#"), rows.size()) << name;
  }
}

TEST(HtmlReport, AComparisonsBadFieldNamesFileAndPath) {
  const fs::path dir = pipebal::testing::fresh_dir("bad_comparison");
  json doc = plans_comparison();
  doc["plans"][1]["measured_rank"] = 3;  // of two plans
  write_file_atomically((dir / "plans-comparison.json").string(), doc.dump());
  const std::string message =
      error_of([&] { render_html_report(load_report_inputs(dir.string())); });
  EXPECT_NE(message.find("plans-comparison.json: plans[1].measured_rank"), std::string::npos)
      << message;
  // A step time no chart can draw, and a comparison of nothing.
  const auto refused = [&](json changed, const std::string& expected) {
    write_file_atomically((dir / "plans-comparison.json").string(), changed.dump());
    const std::string why = error_of([&] { render_html_report(load_report_inputs(dir.string())); });
    EXPECT_NE(why.find(expected), std::string::npos) << why;
  };
  json huge = plans_comparison();
  huge["plans"][0]["measured_step_ms"] = 1.79e308;
  refused(huge,
          "plans-comparison.json: plans[0].measured_step_ms is 1.79e+308 ms, expected 0 "
          "to 1e+12");
  json named = plans_comparison();
  named["plans"][0]["schedule"] = "foo";
  refused(named, "plans[0].schedule is not valid: unknown schedule 'foo'");
  json devices = plans_comparison();
  devices["plans"][0]["measured_device_bytes"] = {1, 2, 3};
  refused(devices, "plans[0].measured_device_bytes has 3 entries for 2 devices");
  devices["plans"][0]["virtual_stages"] = 2;
  devices["plans"][0]["balance"] = {1, 2, 4};
  refused(devices, "plans[0].balance has 3 stages, not whole rounds of 2 per device");
  json tied = plans_comparison();
  tied["plans"][1]["measured_rank"] = tied["plans"][0]["measured_rank"];
  refused(tied, "plans[1].measured_rank is 2, as another configuration's");
  json none = plans_comparison();
  none["plans"] = json::array();
  refused(none, "plans-comparison.json: plans is empty: the comparison trained nothing");
  doc["schema"] = "pipebal.plans-comparison/2";
  write_file_atomically((dir / "plans-comparison.json").string(), doc.dump());
  const std::string schema = error_of([&] { load_report_inputs(dir.string()); });
  EXPECT_NE(schema.find("pipebal.plans-comparison/2"), std::string::npos) << schema;
}

}  // namespace
}  // namespace pipebal::reports
