// `pipebal train` end to end: the run document, the Chrome trace, and bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"
#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

const std::string kModel = "--model mlp:layers=4,width=8 --input-shape 8,8";

// --bind-cores gives each device's stage thread cores of its own, as many as it has threads, and
// trains as without it; more than this process may run on is one line and status 2, before any
// work.
TEST(TrainCli, BindCoresTrainsOnCoresOfTheirOwnOrSaysThereAreTooFew) {
  const std::string dir = fresh_dir("train_bind");
  const int cpus = static_cast<int>(pipebal::allowed_cpus().size());
  const CliResult plain =
      run_pipebal("train " + kModel + " --balance 3,2 --steps 2 -o " + dir + "/plain.json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  const CliResult bound = run_pipebal(
      "train " + kModel + " --balance 3,2 --steps 2 --bind-cores -o " + dir + "/bound.json");
  if (cpus >= 2) {
    ASSERT_EQ(bound.status, 0) << bound.err;
    const auto losses = [&](const std::string& file) {
      std::vector<double> l;
      for (const auto& step : nlohmann::json::parse(read_text(dir + file))["steps"]) {
        l.push_back(step["loss"].get<double>());
      }
      return l;
    };
    EXPECT_EQ(losses("/bound.json"), losses("/plain.json"));  // where it runs, not what
  }
  const CliResult too_many = run_pipebal(fmt::format(
      "train --model mlp:layers={},width=8 --input-shape 8,8 --balance {} --bind-cores -o "
      "{}/x.json",
      cpus + 1, fmt::join(std::vector<int>(static_cast<size_t>(cpus) + 2, 1), ","), dir));
  EXPECT_EQ(too_many.status, 2) << too_many.err;
  EXPECT_NE(too_many.err.find(fmt::format(
                "--bind-cores: {} devices of 1 thread each need {} cores of their own; this "
                "process may run on {}",
                cpus + 2, cpus + 2, cpus)),
            std::string::npos)
      << too_many.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.json"));
}

TEST(TrainCli, WritesRunDocumentAndTrace) {
  const std::string dir = fresh_dir("train_ok");
  const CliResult r = run_pipebal("train " + kModel + " --balance 3,2 --chunks 4 --steps 3 " +
                                  "--warmup-steps 1 --schedule 1f1b -o " + dir +
                                  "/run.json --trace " + dir + "/trace.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("median step"), std::string::npos);

  const auto run = nlohmann::json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["schema"], "pipebal.run/1");
  EXPECT_EQ(run["balance"], nlohmann::json({3, 2}));
  EXPECT_EQ(run["chunks"], 4);
  EXPECT_EQ(run["schedule"], "1f1b");
  EXPECT_EQ(run["steps"].size(), 3u);
  EXPECT_EQ(run["stages"].size(), 2u);
  EXPECT_GT(run["median_step_ms"].get<double>(), 0);
  // The timeline's step: the closest to the median, named with its own time above the stages.
  const int traced = run["timeline_step"].get<int>();
  ASSERT_GE(traced, 0);
  ASSERT_LT(traced, 3);
  const double median = run["median_step_ms"].get<double>();
  for (const auto& step : run["steps"]) {
    EXPECT_LE(std::abs(run["steps"][traced]["ms"].get<double>() - median),
              std::abs(step["ms"].get<double>() - median));
  }
  EXPECT_NE(r.out.find(fmt::format("in step {} ({:.3f} ms, the closest to the median)", traced + 1,
                                   run["steps"][traced]["ms"].get<double>())),
            std::string::npos)
      << r.out;
  // One step of 2 stages x 4 micro-batches: a forward, a recompute (except the last
  // micro-batch: checkpoint except_last) and a backward each.
  EXPECT_EQ(run["timeline"].size(), 2u * (4 + 3 + 4));

  const auto trace = nlohmann::json::parse(read_text(dir + "/trace.json"));
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) slices += e["ph"] == "X";
  EXPECT_EQ(slices, 2 * (4 + 3 + 4));
}

// What a run wrote is named on standard output with the paths' control characters escaped: a
// newline does not break the line, an escape sequence does not reach the terminal.
TEST(TrainCli, NamesWhatItWroteWithControlCharactersEscaped) {
  const std::string dir = fresh_dir("train_escaped");
  const CliResult r =
      run_pipebal("train " + kModel + " --balance 3,2 --steps 1 -q -o \"$(printf '" + dir +
                  "/r\\nun.json')\" --trace \"$(printf '" + dir + "/t\\033[7mr.json')\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.out.find("\nwrote " + dir + "/r\\nun.json\nwrote " + dir + "/t\\x1b[7mr.json (open in "),
      std::string::npos)
      << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/r\nun.json"));
  const CliResult profile = run_pipebal("profile " + kModel + " --repeat 1 -q -o \"$(printf '" +
                                        dir + "/p\\nrofile.json')\"");
  ASSERT_EQ(profile.status, 0) << profile.err;
  EXPECT_NE(profile.out.find("\nwrote " + dir + "/p\\nrofile.json\n"), std::string::npos)
      << profile.out;
}

// --deferred-batch-norm takes a model with pipebal's batch norm (the zoo's ResNet); one without
// any is refused (tests/tools/bad_input_test.cpp).
TEST(TrainCli, DefersTheBatchNormOfAModelThatHasOne) {
  const CliResult r = run_pipebal(
      "train --model resnet:depth=18,width=4 --input-shape 4,3,16,16 --balance 5,5 --chunks 2 "
      "--steps 1 --warmup-steps 0 -q --deferred-batch-norm");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(TrainCli, LossDecreasesOnTheSyntheticTask) {
  const std::string dir = fresh_dir("train_learn");
  const CliResult r =
      run_pipebal("train " + kModel + " --balance 3,2 --chunks 2 --steps 20 " +
                  "--warmup-steps 0 --optimizer adam --lr 0.01 -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto steps = nlohmann::json::parse(read_text(dir + "/run.json"))["steps"];
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.7 * steps.front()["loss"].get<double>());
}

// A learning rate far too large makes the loss NaN within a few steps: the run finishes (no
// --check-finite), records the steps, and says on stderr at which step the loss stopped being
// a number (with --check-finite it stops there); a run that learns says nothing of the kind.
TEST(TrainCli, SaysWhenTheLossDiverged) {
  const std::string dir = fresh_dir("train_diverged");
  CliResult r = run_pipebal("train " + kModel + " --balance 3,2 --chunks 2 --steps 8 " +
                            "--warmup-steps 0 --lr 1e30 -q -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto steps = nlohmann::json::parse(read_text(dir + "/run.json"))["steps"];
  size_t first_nan = 0;
  while (first_nan < steps.size() && steps[first_nan]["loss"].is_number()) ++first_nan;
  ASSERT_LT(first_nan, steps.size()) << "the loss never became NaN";
  EXPECT_NE(r.err.find(fmt::format("pipebal: warning: the loss became nan at step {} of 8: "
                                   "training diverged",
                                   first_nan + 1)),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  // --check-finite stops there instead, naming the step, and writes no run.json.
  r = run_pipebal("train " + kModel + " --balance 3,2 --chunks 2 --steps 8 --warmup-steps 0 " +
                  "--lr 1e30 --check-finite -q -o " + dir + "/stopped.json");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(
      r.err.find(fmt::format("pipebal: error: step {} of 8: stage 1, micro-batch ", first_nan + 1)),
      0u)
      << r.err;
  EXPECT_NE(r.err.find(": non-finite loss ("), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/stopped.json"));
  r = run_pipebal("train " + kModel + " --balance 3,2 --chunks 2 --steps 2 --warmup-steps 0 -q");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("diverged"), std::string::npos) << r.err;
}

// GPipe keeps all 8 micro-batches' activations on stage 0 until the backward pass; 1F1B at
// most 2 (stages - stage index). Measured per stage by the counting allocator.
TEST(TrainCli, OneFOneBKeepsLessAliveThanGPipe) {
  const std::string dir = fresh_dir("train_memory");
  std::map<std::string, std::vector<int64_t>> peaks;
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    const CliResult r = run_pipebal(
        "train --model mlp:layers=6,width=64 --input-shape 512,64 "
        "--balance 4,3 --chunks 8 --steps 2 --checkpoint never "
        "--schedule " +
        schedule + " -o " + dir + "/" + schedule + ".json");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto run = nlohmann::json::parse(read_text(dir + "/" + schedule + ".json"));
    for (const auto& stage : run["stages"])
      peaks[schedule].push_back(stage["peak_memory_bytes"].get<int64_t>());
  }
  EXPECT_GT(peaks["gpipe"][0], 0);
  EXPECT_LT(peaks["1f1b"][0], peaks["gpipe"][0] / 2);
}

// validate trains each candidate at M micro-batches and at 1 in turns, both pipelines alive at
// once; the pipelined run's per-stage peak memory must be what `train` measures for it alone.
TEST(TrainCli, ValidateMeasuresMemoryAsTrainAloneDoes) {
  const std::string dir = fresh_dir("validate_memory");
  const std::string model = "--model mlp:layers=6,width=64 --input-shape 512,64";
  const CliResult v = run_pipebal("validate " + model +
                                  " --stages 2 --chunks 8 --steps 2 --checkpoint never -o " + dir);
  ASSERT_EQ(v.status, 0) << v.err;
  const auto interleaved = nlohmann::json::parse(read_text(dir + "/run.json"));
  std::string balance;
  for (const auto& layers : interleaved["balance"])
    balance += (balance.empty() ? "" : ",") + std::to_string(layers.get<int>());
  const CliResult t =
      run_pipebal("train " + model + " --balance " + balance +
                  " --chunks 8 --steps 2 --checkpoint never -o " + dir + "/alone.json");
  ASSERT_EQ(t.status, 0) << t.err;
  const auto alone = nlohmann::json::parse(read_text(dir + "/alone.json"));
  ASSERT_EQ(alone["stages"].size(), interleaved["stages"].size());
  for (size_t s = 0; s < alone["stages"].size(); ++s) {
    const auto expected = alone["stages"][s]["peak_memory_bytes"].get<double>();
    EXPECT_GT(expected, 0);
    EXPECT_NEAR(interleaved["stages"][s]["peak_memory_bytes"].get<double>(), expected,
                0.01 * expected)
        << "stage " << s;
  }
}

// Stages whose threads need more cores than pipebal may run on are trained, with one warning line.
TEST(TrainCli, WarnsWhenItsStagesNeedMoreCoresThanItMayRunOn) {
  const std::string dir = fresh_dir("train_oversubscribed");
  const int cores = pipebal::usable_cores();
  if (cores < 2) GTEST_SKIP() << "one core: one intra-op thread per stage is all there is";
  const std::string run =
      " --model mlp:layers=2,width=8 --input-shape 4,8 --steps 1 "
      "--warmup-steps 0 -q -o " +
      dir + "/run.json";
  CliResult r = run_pipebal("train --balance 2,1 --threads " + std::to_string(cores) + run);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("pipebal: warning: 2 stages x " + std::to_string(cores) +
                       " intra-op threads need " + std::to_string(2 * cores) + " cores"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run_pipebal("train --balance 3 --threads 1" + run);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST(TrainCli, BadInputIsOneLineExitTwoAndNoOutputFile) {
  const std::string dir = fresh_dir("train_bad");
  const std::string out = " -o " + dir + "/run.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train " + kModel + " --balance 3,3", "sums to 6, but the model has 5 layers"},
      {"train " + kModel + " --balance 2,0,3", "every stage needs at least one"},
      {"train " + kModel + " --balance 2,x", "expected layer counts"},
      {"train " + kModel + " --balance 2,3 --chunks 9", "more chunks than samples"},
      {"train " + kModel, "give --plan plan.json or --balance"},
      {"train " + kModel + " --balance 2,3 --plan p.json", "excludes"},
      {"train " + kModel + " --plan /nonexistent/plan.json", "/nonexistent/plan.json"},
      {"train --model mlp:layers=4,width=8 --input-shape 8,9 --balance 2,3", "layer 0 ('fc0'"},
      {"train " + kModel + " --balance 2,3 --schedule zigzag", "gpipe, 1f1b"},
      {"train " + kModel + " --balance 2,3 --devices cpu,cpu,cpu", "3 devices given for 2 stages"},
      {"train " + kModel + " --balance 2,3 --optimizer lbfgs",
       "unknown optimizer 'lbfgs' (valid: sgd, adam)"},
  };
  for (const auto& [args, fragment] : cases) {
    const CliResult r = run_pipebal(args + out);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(read_text(dir + "/run.json").empty()) << args;
  }
}

// A run whose output cannot be written is refused before it trains or profiles: one line, exit
// 2, nothing printed on stdout (where the run's summary would be) and nothing left behind.
TEST(TrainCli, AnOutputItCannotWriteIsRefusedBeforeTheWork) {
  const std::string dir = fresh_dir("train_unwritable");
  const std::string missing = dir + "/missing/out.json";
  const std::vector<std::string> cases = {
      "train " + kModel + " --balance 2,3 --steps 2 -o " + missing,
      "train " + kModel + " --balance 2,3 --steps 2 --trace " + missing,
      "train " + kModel + " --balance 2,3 --steps 2 -o " + dir,  // a directory
      "profile " + kModel + " -o " + missing,
  };
  for (const std::string& args : cases) {
    const CliResult r = run_pipebal(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("cannot write"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args << ": the work ran before the output was checked";
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 0) << "no temporaries";
}

}  // namespace
}  // namespace pipebal::testing
