// The HTML report: renders the hand-made validation directory, stays self-contained, escapes
// text from JSON, degrades to notes when optional files are missing, and names the file in
// every input error.
#include "pipebal/reports/html_report.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <regex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "tests/reports/report_test_support.h"
#include "tests/support/scratch_dir.h"

#include "pipebal/common/atomic_file.h"
#include "pipebal/reports/report_charts.h"
#include "pipebal/reports/svg.h"

namespace pipebal::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string render_fixture() {
  return render_html_report(load_report_inputs(kFixtureDir));
}

TEST(HtmlReport, RendersFixtureWithSummaryRowsAndNumbers) {
  const std::string html = render_fixture();
  EXPECT_NE(html.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(html.find("name=\"viewport\""), std::string::npos);
  EXPECT_NE(html.find("cnn:blocks=4,width=32"), std::string::npos);
  EXPECT_NE(html.find("32\u00d73\u00d764\u00d764"), std::string::npos);
  // One summary row per candidate, with its balance and the predicted/measured step times
  // (validation.json: dp [4,5,3] predicted 73.16 ms, measured 79.942 ms).
  EXPECT_NE(html.find("<td class=\"l\">[4, 5, 3]</td><td>73.2</td><td>79.9</td>"),
            std::string::npos);
  // Two algorithms that chose the same balance share one row.
  EXPECT_NE(html.find("<td class=\"l\">blockpartition, uniform</td><td class=\"l\">[4, 4, 4]</td>"),
            std::string::npos);
  // Prediction error (73.16 - 79.942) / 79.942 = -8.5%; speed-ups 1.556 vs 1.5001.
  EXPECT_NE(html.find("-8.5%"), std::string::npos);
  EXPECT_NE(html.find("1.56\u00d7"), std::string::npos);
  EXPECT_NE(html.find("1.50\u00d7"), std::string::npos);
  // Context block from the environment.
  EXPECT_NE(html.find("libtorch_version"), std::string::npos);
  EXPECT_NE(html.find("ee232b9"), std::string::npos);
  // The per-layer table, last: every layer by name.
  EXPECT_NE(html.find("<td class=\"l\">block3.conv</td>"), std::string::npos);
  EXPECT_LT(html.find("<h2>Candidates"), html.find("<h2>Layers</h2>"));
  // The plan's 6 MiB cap appears in the stage table.
  EXPECT_NE(html.find("6.00 MiB"), std::string::npos);
}

TEST(HtmlReport, DrawsEveryChartAsInlineSvg) {
  const std::string html = render_fixture();
  EXPECT_NE(html.find("aria-label=\"Per-layer forward and backward time"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"Busy time per step and stage"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"Memory per stage"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"Pipeline timeline"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"Loss per training step"), std::string::npos);
  // Layer chart + (2 stage charts + timeline) for each of the 2 candidates + the loss curve.
  EXPECT_EQ(count(html, "<svg "), 1u + 2u * 3u + 1u);
  EXPECT_EQ(count(html, "<svg "), count(html, "viewBox="));
  // Gantt boxes carry their action and micro-batch; the predicted and measured panels both exist.
  EXPECT_NE(html.find("Predicted (simulator)"), std::string::npos);
  EXPECT_NE(html.find("Measured (engine)"), std::string::npos);
  EXPECT_NE(html.find("stage 2 B3 (backward)"), std::string::npos);
  EXPECT_NE(html.find("time within the step (ms)"), std::string::npos);
}

TEST(HtmlReport, IsSelfContained) {
  const std::string html = render_fixture();
  // The SVG namespace is an identifier, not a resource.
  const std::string without_xmlns =
      std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_EQ(without_xmlns.find("http://"), std::string::npos);
  EXPECT_EQ(without_xmlns.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(HtmlReport, EscapesTextFromJson) {
  ReportInputs inputs = load_report_inputs(kFixtureDir);
  const std::string evil = "<script>alert(\"x&y\")</script>";
  for (auto* document : {&*inputs.validation, &*inputs.profile, &*inputs.plan, &*inputs.run}) {
    (*document)["model"] = evil;  // each names the model alike
  }
  (*inputs.profile)["layers"][0]["name"] = "<img src=x onerror=alert(1)>";
  (*inputs.validation)["environment"]["host"] = "a&b<c>";
  const std::string html = render_html_report(inputs);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;"),
            std::string::npos);
  EXPECT_NE(html.find("a&amp;b&lt;c&gt;"), std::string::npos);
}

TEST(HtmlReport, RendersWithoutOptionalFilesAndSaysWhatIsMissing) {
  ScratchDir dir("missing");
  fs::remove(dir.file("validation.json"));
  fs::remove(dir.file("run.json"));
  const std::string plan_only = render_html_report(load_report_inputs(dir.path()));
  EXPECT_NE(plan_only.find("validation.json is missing"), std::string::npos);
  EXPECT_NE(plan_only.find("run.json is missing"), std::string::npos);
  EXPECT_NE(plan_only.find("[4, 5, 3]"), std::string::npos);  // the plan's balance
  EXPECT_NE(plan_only.find("No predicted or measured timeline"), std::string::npos);

  fs::remove(dir.file("plan.json"));
  const std::string profile_only = render_html_report(load_report_inputs(dir.path()));
  EXPECT_NE(profile_only.find("plan.json is missing"), std::string::npos);
  EXPECT_NE(profile_only.find("Only the profile is present"), std::string::npos);
  EXPECT_NE(profile_only.find("<td class=\"l\">head.fc</td>"), std::string::npos);
  EXPECT_EQ(count(profile_only, "<svg "), 1u);  // the layer chart
}

TEST(HtmlReport, RunWithoutValidationIsTheMeasuredSide) {
  ScratchDir dir("run_only");
  fs::remove(dir.file("validation.json"));
  const std::string html = render_html_report(load_report_inputs(dir.path()));
  // plan.json and run.json share the balance [4,5,3]: one row, predicted and measured.
  EXPECT_NE(html.find("<td class=\"l\">[4, 5, 3]</td><td>73.2</td><td>79.9</td>"),
            std::string::npos);
  EXPECT_NE(html.find("Measured (engine)"), std::string::npos);
  EXPECT_NE(html.find("No predicted timeline"), std::string::npos);
  EXPECT_NE(html.find("Training run"), std::string::npos);
}

TEST(HtmlReport, TheTrainingRunHasALossCurveThroughEveryStep) {
  const json run = json::parse(read_file(kFixtureDir + "/run.json"));
  const std::string html = render_fixture();
  EXPECT_EQ(count(html, "aria-label=\"Loss per training step\""), 1u);
  EXPECT_EQ(count(html, "<title>step "), run["steps"].size());
  const double first = run["steps"][0]["loss"].get<double>();
  EXPECT_NE(html.find(fmt::format("<title>step 0: loss {:.4f}</title>", first)), std::string::npos);
}

// A long run draws the means of groups of steps, and its table lists the first and last 500
// steps: the report stays small (a point and a row per step made 300,000 steps 78 MB).
TEST(HtmlReport, ALongRunIsDrawnAndListedInBoundedSpace) {
  ScratchDir dir("long_run");
  json run = dir.read("run.json");
  json steps = json::array();
  constexpr int kSteps = 100000;
  for (int i = 0; i < kSteps; ++i) {
    steps.push_back({{"step", i}, {"ms", 10.0}, {"loss", 2.0 - 1e-5 * i}});
  }
  run["steps"] = steps;
  dir.write("run.json", run);
  const std::string html = render_html_report(load_report_inputs(dir.path()));
  EXPECT_LT(html.size(), 1u << 20);
  // 100000 steps in groups of 179 (no more than kMaxLossCurvePoints groups): 559 points, the
  // first group's mean and the last (partial) group's.
  static_assert(kMaxLossCurvePoints == 560);
  EXPECT_EQ(count(html, "<title>step"), 559u);
  EXPECT_NE(html.find("<title>steps 0 to 178: mean loss 1.9991</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>steps 99882 to 99999: mean loss 1.0006</title>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">499</td>"), std::string::npos);
  EXPECT_EQ(html.find("<td class=\"l\">500</td>"), std::string::npos);
  EXPECT_NE(html.find("\u2026 99000 steps left out here (run.json has every one)"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">99500</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">99999</td>"), std::string::npos);
}

TEST(LossCurve, DrawsKnownLossesOnlyAndNeedsTwo) {
  const double nan = std::nan("");
  EXPECT_EQ(count(loss_curve_chart({{1, 2.0}, {1, nan}, {1, 1.5}}), "<title>step "), 2u);
  EXPECT_NE(loss_curve_chart({{1, 2.0}, {1, nan}, {1, 1.5}}).find("step 2: loss 1.5000"),
            std::string::npos);
  EXPECT_EQ(loss_curve_chart({{1, 2.0}, {1, nan}}), "");
  EXPECT_EQ(loss_curve_chart({}), "");
}

// The markers' centres (the plot spans y 16 to 200): a negative loss is drawn inside it, above
// a negative tick, and a loss past any drawable span is left out like NaN, not drawn as inf.
TEST(LossCurve, DrawsNegativeLossesInsideThePlotAndLeavesOutUndrawableOnes) {
  const std::string svg = loss_curve_chart({{1, 2.0}, {1, -3.0}, {1, 1.79e308}, {1, 0.5}});
  EXPECT_EQ(count(svg, "<title>step "), 3u);
  for (const char* undrawn : {"\"inf", "\"-inf", "\"nan", ">inf<", ">nan<"})
    EXPECT_EQ(svg.find(undrawn), std::string::npos) << undrawn << " in " << svg;
  const std::regex marker(R"re(<rect x="[-0-9.]+" y="([-0-9.]+)"[^>]*><title>step (\d+))re");
  std::vector<double> y(4, std::nan(""));
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), marker); it != std::sregex_iterator();
       ++it) {
    y[std::stoul((*it)[2])] = std::stod((*it)[1]) + 2.5;
  }
  // Ticks -4 to 2 span the plot: loss l sits at 200 - 184 (l + 4) / 6.
  EXPECT_NEAR(y[1], 200 - 184.0 / 6, 0.06);
  EXPECT_NEAR(y[3], 200 - 184.0 * 4.5 / 6, 0.06);
  EXPECT_NEAR(y[0], 16, 0.06);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_NE(svg.find(">-4</text>"), std::string::npos) << svg;
  // Steps are whole numbers: with 4 steps the axis labels 0 to 3 once each.
  for (const char* step : {">0</text>", ">1</text>", ">2</text>", ">3</text>"})
    EXPECT_EQ(count(svg, std::string("text-anchor=\"middle\">") + (step + 1)), 1u)
        << step << " in " << svg;
  EXPECT_EQ(svg.find(">0.5</text>"), std::string::npos) << svg;
}

TEST(HtmlReport, UnknownSchemaMajorIsRejectedNamingTheFile) {
  ScratchDir dir("schema");
  json run = dir.read("run.json");
  run["schema"] = "pipebal.run/2";
  dir.write("run.json", run);
  const std::string message = error_of([&] { load_report_inputs(dir.path()); });
  EXPECT_NE(message.find("run.json"), std::string::npos) << message;
  EXPECT_NE(message.find("pipebal.run/2"), std::string::npos) << message;
}

TEST(HtmlReport, MalformedJsonNamesTheFile) {
  ScratchDir dir("malformed");
  write_file_atomically(dir.file("validation.json"), "{\"schema\": \"pipebal.validation/1\",");
  const std::string message = error_of([&] { load_report_inputs(dir.path()); });
  EXPECT_NE(message.find("validation.json"), std::string::npos) << message;
  EXPECT_NE(message.find("malformed JSON"), std::string::npos) << message;
}

// Candidates whose balance or per-stage numbers make no sense are refused naming the field, not
// drawn.
TEST(HtmlReport, ACandidatesNonsenseIsRefusedNamingTheField) {
  ScratchDir dir("nonsense");
  const auto rendering = [&] { render_html_report(load_report_inputs(dir.path())); };
  json validation = dir.read("validation.json");
  const json good = validation;
  validation["candidates"][0]["balance"] = {100, -3};
  dir.write("validation.json", validation);
  const std::string bad_balance = error_of(rendering);
  EXPECT_NE(bad_balance.find("candidates[0].balance[1] is -3, expected 1 to"), std::string::npos)
      << bad_balance;
  validation = good;
  json& busy = validation["candidates"][0]["measured"]["stage_busy_ms"];
  const size_t stages = validation["candidates"][0]["balance"].size();
  busy = json::array();
  for (size_t s = 0; s < stages + 3; ++s) busy.push_back(1.0);
  dir.write("validation.json", validation);
  const std::string bad_stages = error_of(rendering);
  EXPECT_NE(
      bad_stages.find(fmt::format(
          "candidates[0].measured.stage_busy_ms has {} entries for {} stages", stages + 3, stages)),
      std::string::npos)
      << bad_stages;
}

// Every balance the report draws over the profile's layers covers them exactly: a document of
// another model (or a profile replaced since) is refused, naming both files.
TEST(HtmlReport, BalancesThatDoNotCoverTheProfilesLayersAreRefused) {
  ScratchDir dir("other_model");
  const auto rendering = [&] { render_html_report(load_report_inputs(dir.path())); };
  const json profile = dir.read("profile.json");
  const size_t layers = profile["layers"].size();
  json fewer = profile;
  fewer["layers"].erase(fewer["layers"].size() - 1);
  dir.write("profile.json", fewer);
  const std::string message = error_of(rendering);
  EXPECT_NE(message.find(fmt::format("covers {} layers, but {} has {}: are they of the same "
                                     "model and run?",
                                     layers, dir.file("profile.json"), layers - 1)),
            std::string::npos)
      << message;
  dir.write("profile.json", profile);
  json run = dir.read("run.json");
  run["balance"] = {4, 5, 4};
  dir.write("run.json", run);
  EXPECT_NE(error_of(rendering).find(dir.file("run.json") + ": balance [4,5,4] covers 13 layers"),
            std::string::npos);
}

// Documents of another model with as many layers are refused too: they name their model.
TEST(HtmlReport, DocumentsOfAnotherModelAreRefused) {
  ScratchDir dir("other_model_named");
  const auto rendering = [&] { render_html_report(load_report_inputs(dir.path())); };
  const std::string model = dir.read("profile.json")["model"];
  ASSERT_FALSE(model.empty());
  EXPECT_NO_THROW(rendering());
  for (const char* name : {"plan.json", "run.json", "validation.json"}) {
    json document = dir.read(name);
    const json kept = document;
    document["model"] = "mlp:layers=9,width=64";
    dir.write(name, document);
    EXPECT_EQ(error_of(rendering),
              fmt::format("{}: model 'mlp:layers=9,width=64', but {} is of '{}': are they of the "
                          "same model and run?",
                          dir.file(name), dir.file("profile.json"), model))
        << name;
    dir.write(name, kept);
  }
  // A TorchScript model moved since the profile keeps its file name: the same model.
  for (const char* name : {"profile.json", "plan.json", "run.json", "validation.json"}) {
    json document = dir.read(name);
    document["model"] = std::string(name) == "run.json" ? "/moved/here/lm.pt" : "/first/lm.pt";
    dir.write(name, document);
  }
  EXPECT_NO_THROW(rendering());
  json run = dir.read("run.json");
  run["model"] = "/first/other.pt";
  dir.write("run.json", run);
  EXPECT_NE(error_of(rendering).find("model '/first/other.pt', but "), std::string::npos);
}

// A validation.json that is a link to a file no longer there was meant to be read: the report
// says so rather than render as if validate had not run.
TEST(HtmlReport, ALinkToAMissingFileIsAnErrorNotAnAbsence) {
  ScratchDir dir("dangling");
  fs::remove(dir.file("validation.json"));
  fs::create_symlink(dir.file("gone.json"), dir.file("validation.json"));
  const std::string message = error_of([&] { load_report_inputs(dir.path()); });
  EXPECT_NE(message.find("validation.json"), std::string::npos) << message;
}

TEST(HtmlReport, MissingProfileOrDirectoryIsAnError) {
  ScratchDir dir("no_profile");
  fs::remove(dir.file("profile.json"));
  const std::string message = error_of([&] { load_report_inputs(dir.path()); });
  EXPECT_NE(message.find("profile.json"), std::string::npos) << message;
  const std::string not_dir = error_of([&] { load_report_inputs(dir.file("nowhere")); });
  EXPECT_NE(not_dir.find("is not a directory"), std::string::npos) << not_dir;
}

TEST(HtmlReport, MistypedFieldNamesFileAndPath) {
  ScratchDir dir("mistyped");
  json validation = dir.read("validation.json");
  validation["candidates"][1]["predicted"]["step_ms"] = "fast";
  dir.write("validation.json", validation);
  const std::string message = error_of([&] { render_html_report(load_report_inputs(dir.path())); });
  EXPECT_NE(message.find("validation.json: candidates[1].predicted.step_ms"), std::string::npos)
      << message;
}

TEST(HtmlReport, UnmeasuredMemoryIsADash) {
  ScratchDir dir("null_memory");
  json validation = dir.read("validation.json");
  for (json& c : validation["candidates"])
    c["measured"]["stage_peak_bytes"] = {nullptr, nullptr, nullptr};
  // A measured-peak cell after a predicted-memory cell: with nothing measured, a dash.
  const std::regex dash_after_bytes("<td>[0-9.]+ (B|KiB|MiB|GiB)</td><td>\u2013</td>");
  auto dashes = [&](const std::string& html) {
    return std::distance(std::sregex_iterator(html.begin(), html.end(), dash_after_bytes),
                         std::sregex_iterator());
  };
  const long before = dashes(render_html_report(load_report_inputs(dir.path())));
  dir.write("validation.json", validation);
  const long after = dashes(render_html_report(load_report_inputs(dir.path())));
  EXPECT_GE(after, before + 3) << "one dash per stage of the drawn candidate";
}

// A profile's layer time past the bounds `balance` holds it to is refused, not drawn as inf.
TEST(HtmlReport, AProfileTimeBalanceWouldRefuseIsRefused) {
  ScratchDir dir("huge_profile");
  json profile = dir.read("profile.json");
  profile["layers"][0]["forward_ms"] = 1.79e308;
  dir.write("profile.json", profile);
  const std::string message = error_of([&] { render_html_report(load_report_inputs(dir.path())); });
  EXPECT_NE(message.find("profile.json"), std::string::npos) << message;
  EXPECT_NE(message.find("forward_ms"), std::string::npos) << message;
}

TEST(Svg, EscapesAndFormats) {
  EXPECT_EQ(escape_html("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  EXPECT_EQ(format_ms(71.01), "71.0");
  EXPECT_EQ(format_ms(7.104), "7.10");
  EXPECT_EQ(format_ms(0.7123), "0.712");
  EXPECT_EQ(format_ms(250.4), "250");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(6 * 1024 * 1024), "6.00 MiB");
  EXPECT_EQ(format_percent(-0.0862), "-8.6%");
}

TEST(Svg, NiceTicksCoverTheRangeInRoundSteps) {
  EXPECT_EQ(nice_ticks(9.5, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0.3, 3), (std::vector<double>{0, 0.1, 0.2, 0.30000000000000004}));
  EXPECT_EQ(nice_ticks(0, 5), (std::vector<double>{0, 1}));
  EXPECT_EQ(nice_ticks(-3, 9.5, 3), (std::vector<double>{-5, 0, 5, 10}));
  EXPECT_EQ(nice_ticks(2, 7, 5), (std::vector<double>{2, 3, 4, 5, 6, 7}));
  // Past a drawable span: no tick of inf (1.79e308 rounded up to 2e308 did).
  EXPECT_EQ(nice_ticks(1.79e308, 4), (std::vector<double>{0, 1}));
  EXPECT_EQ(nice_ticks(-1e301, 1, 4), (std::vector<double>{0, 1}));
}

}  // namespace
}  // namespace pipebal::reports
