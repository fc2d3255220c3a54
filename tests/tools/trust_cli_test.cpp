// What pipebal runs is the user's model, and what it prints is what it measured: TorchScript
// models cut at their module calls (residual adds, skips) go through every command, those it
// cannot cut are refused by every command, TorchScript
// failures name the layer and the cause, and a profile's micro-batch size follows it into the
// plan and the training run.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

const std::string kFixtures = PIPEBAL_FIXTURES_DIR;

void expect_one_line_error(const CliResult& r, const std::string& fragment,
                           const std::string& args) {
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
  EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
  EXPECT_EQ(r.err.rfind("pipebal: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
}

TEST(TrustCli, EveryCommandRefusesAModelItCannotCut) {
  const std::string model = "--model " + kFixtures + "/refused_if_on_data_scripted.pt";
  const std::string dir = scratch_dir();
  for (const std::string& args : std::vector<std::string>{
           "profile " + model + " --input-shape 4,8 -o " + dir + "/profile.json",
           "train " + model + " --input-shape 4,8 --balance 2,1 -o " + dir + "/run.json",
           "validate " + model + " --input-shape 4,8 --stages 2 -o " + dir + "/validated"}) {
    expect_one_line_error(run_pipebal(args),
                          "cannot be cut into layers: forward uses its modules inside control "
                          "flow (an if)",
                          args);
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/profile.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run.json"));
}

// No command writes over what it reads, nor one output over another: every write is atomic,
// so `profile --model m.pt -o m.pt` replaced the user's model with a profile. Refused up front,
// through a symbolic link too; the files stay as they were.
TEST(TrustCli, NoOutputReplacesAnInputOrAnotherOutput) {
  const std::string dir = scratch_dir();
  const std::string model = dir + "/m.pt";
  std::filesystem::copy_file(kFixtures + "/chain_named_traced.pt", model);
  std::filesystem::create_symlink("m.pt", dir + "/link.pt");
  std::filesystem::create_symlink("t.json", dir + "/dangling.json");
  const std::string train =
      "train --model " + model + " --input-shape 4,8 --balance 2,1 --steps 1 --warmup-steps 0 -q";
  const std::string profile = dir + "/p.json";
  ASSERT_EQ(
      run_pipebal("profile --model " + model + " --input-shape 4,8 --repeat 2 -q -o " + profile)
          .status,
      0);
  std::filesystem::create_directories(dir + "/r");
  std::filesystem::copy_file(profile, dir + "/r/profile.json");
  const std::string model_bytes = read_text(model), profile_bytes = read_text(profile);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"profile --model " + model + " --input-shape 4,8 -q -o " + model,
       "-o '" + model + "' is the file --model reads: writing it would replace it"},
      {"profile --model " + model + " --input-shape 4,8 -q -o " + dir + "/link.pt",
       "is the file --model reads"},
      {train + " --save " + model, "--save '" + model + "' is the file --model reads"},
      {train + " --save " + dir + "/s.pt -o " + dir + "/s.pt",
       "-o and --save name the same file ('" + dir + "/s.pt'): one would replace the other"},
      {train + " -o " + dir + "/t.json --trace " + dir + "/./t.json", "name the same file"},
      // A link to a file not yet written lands where the file will be.
      {train + " -o " + dir + "/t.json --trace " + dir + "/dangling.json", "name the same file"},
      {"balance " + profile + " --stages 2 -o " + profile, "is the file the profile reads"},
      {"plan " + profile + " --devices 2 -o " + profile, "is the file the profile reads"},
      {"report " + dir + "/r -o " + dir + "/r/profile.json", "is the file the report reads"},
  };
  for (const auto& [args, fragment] : cases) {
    expect_one_line_error(run_pipebal(args), fragment, args);
  }
  EXPECT_EQ(read_text(model), model_bytes);
  EXPECT_EQ(read_text(profile), profile_bytes);
  EXPECT_EQ(read_text(dir + "/r/profile.json"), profile_bytes);
  EXPECT_FALSE(std::filesystem::exists(dir + "/s.pt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));
}

// A plan names the layers of the model it was made for: train --plan refuses another model in
// its place (the file replaced since, even by one of as many layers) instead of training it on
// the other's balance.
TEST(TrustCli, APlanTrainsOnlyTheModelItWasMadeFor) {
  const std::string dir = scratch_dir();
  const std::string model = dir + "/m.pt";
  std::filesystem::copy_file(kFixtures + "/chain_named_traced.pt", model);
  ASSERT_EQ(run_pipebal("profile --model " + model + " --input-shape 4,8 --repeat 2 -q -o " + dir +
                        "/p.json")
                .status,
            0);
  ASSERT_EQ(run_pipebal("balance " + dir + "/p.json --stages 2 -o " + dir + "/plan.json").status,
            0);
  const std::string train = " --steps 1 --warmup-steps 0 -q";
  const CliResult planned = run_pipebal("train --plan " + dir + "/plan.json" + train);
  EXPECT_EQ(planned.status, 0) << planned.err;
  EXPECT_EQ(planned.err.find("differs from the plan"), std::string::npos) << planned.err;
  // The command line's choices go first, and the plan's prediction is said not to be this run's.
  const nlohmann::json plan = nlohmann::json::parse(read_text(dir + "/plan.json"));
  const int other = plan["chunks"].get<int>() == 2 ? 4 : 2;
  const CliResult overridden = run_pipebal("train --plan " + dir + "/plan.json --chunks " +
                                           std::to_string(other) + " --checkpoint always" + train);
  EXPECT_EQ(overridden.status, 0) << overridden.err;
  EXPECT_NE(overridden.err.find(fmt::format(
                "pipebal: warning: --chunks {} (planned {}), --checkpoint always (planned {}) "
                "differ from the plan",
                other, plan["chunks"].get<int>(), plan["checkpoint"].get<std::string>())),
            std::string::npos)
      << overridden.err;

  // A plan that does not say its input (balanced from a hand-written profile) trains a zoo
  // model's default input, and says so; a TorchScript model has none, which is the one line.
  EXPECT_EQ(planned.err, "");
  nlohmann::json unsized = plan;
  unsized["input_shape"] = nlohmann::json::array();
  std::ofstream(dir + "/unsized.json") << unsized.dump();
  expect_one_line_error(run_pipebal("train --plan " + dir + "/unsized.json" + train),
                        "model '" + model + "' has no default input: give --input-shape or --input",
                        "unsized plan");
  unsized["model"] = "mlp:layers=2,width=8";
  unsized["stages"][0]["layer_names"] = {"fc0", "fc1"};
  unsized["stages"][1]["layer_names"] = {"head"};
  unsized["stages"][0]["first_layer"] = 0;  // whichever cut the profiled costs chose
  unsized["stages"][0]["layers"] = 2;
  unsized["stages"][1]["first_layer"] = 2;
  unsized["stages"][1]["layers"] = 1;
  unsized["balance"] = {2, 1};
  std::ofstream(dir + "/unsized.json") << unsized.dump();
  const CliResult defaulted = run_pipebal("train --plan " + dir + "/unsized.json" + train);
  EXPECT_EQ(defaulted.status, 0) << defaulted.err;
  EXPECT_EQ(defaulted.err, "pipebal: warning: " + dir +
                               "/unsized.json does not say what input it was made for: training "
                               "the model's default input (give --input-shape to choose)\n");
  // A path with a newline keeps the warning on one line.
  std::ofstream(dir + "/un\nsized.json") << unsized.dump();
  const CliResult escaped =
      run_pipebal("train --plan \"$(printf '" + dir + "/un\\nsized.json')\"" + train);
  EXPECT_EQ(escaped.status, 0) << escaped.err;
  EXPECT_EQ(escaped.err, "pipebal: warning: " + dir +
                             "/un\\nsized.json does not say what input it was made for: training "
                             "the model's default input (give --input-shape to choose)\n");

  // The same layer count, another layer: fc1 renamed in the plan.
  nlohmann::json renamed = nlohmann::json::parse(read_text(dir + "/plan.json"));
  renamed["stages"][0]["layer_names"][0] = "encoder";
  std::ofstream(dir + "/renamed.json") << renamed.dump();
  const std::string args = "train --plan " + dir + "/renamed.json" + train;
  expect_one_line_error(run_pipebal(args),
                        "the plan was made for another model: its layer 0 is 'encoder', " + model +
                            "'s is 'fc1': profile and balance this model",
                        args);

  // The model file replaced by another of 5 layers.
  std::filesystem::copy_file(kFixtures + "/sequential_mlp_scripted.pt", model,
                             std::filesystem::copy_options::overwrite_existing);
  const std::string replaced = "train --plan " + dir + "/plan.json" + train;
  expect_one_line_error(run_pipebal(replaced),
                        "the plan was made for a model of 3 layers; " + model + " has 5", replaced);
}

// A hand-written profile that names no layers gives a plan that names none either: it trains any
// model of that many layers given by --model (none made-up names to refuse it), and has no split
// points to offer torch.distributed.pipelining.
TEST(TrustCli, AProfileWithoutNamesPlansByLayerCountOnly) {
  const std::string dir = scratch_dir();
  nlohmann::json profile = {{"layers", nlohmann::json::array()}};
  for (int i = 0; i < 3; ++i) {
    profile["layers"].push_back({{"forward_ms", 1.0 + i},
                                 {"backward_ms", 2.0},
                                 {"param_bytes", 100},
                                 {"activation_bytes", 10},
                                 {"output_bytes", 10}});
  }
  std::ofstream(dir + "/p.json") << profile.dump();
  ASSERT_EQ(run_pipebal("balance " + dir + "/p.json --stages 2 -o " + dir + "/plan.json").status,
            0);
  const nlohmann::json plan = nlohmann::json::parse(read_text(dir + "/plan.json"));
  for (const auto& stage : plan["stages"]) {
    EXPECT_TRUE(!stage.contains("layer_names") || stage["layer_names"].empty()) << stage;
  }

  const std::string train = "train --plan " + dir +
                            "/plan.json --model mlp:layers=2,width=8 --input-shape 4,8 --steps 1 "
                            "--warmup-steps 0 -q -o " +
                            dir + "/run.json";
  const CliResult trained = run_pipebal(train);
  EXPECT_EQ(trained.status, 0) << trained.err;
  const std::string longer =
      "train --plan " + dir + "/plan.json --model mlp:layers=3,width=8 --input-shape 4,8 --steps 1";
  expect_one_line_error(run_pipebal(longer), "sums to 3, but the model has 4 layers", longer);
  const std::string pippy = "balance " + dir + "/p.json --stages 2 --format pippy";
  expect_one_line_error(run_pipebal(pippy),
                        "the profile does not name every layer: no split points", pippy);
}

// A TorchScript model given by a relative path is named by its absolute path in the profile and
// its plans: a plan used from another directory trains that file (not one of the same name
// there), and --model may name it by any path to it.
TEST(TrustCli, APlanNamesItsModelFileWhereverItIsUsedFrom) {
  const std::string dir = scratch_dir();
  std::filesystem::create_directories(dir + "/ts");
  std::filesystem::copy_file(kFixtures + "/chain_named_traced.pt", dir + "/ts/m.pt");
  std::filesystem::copy_file(kFixtures + "/sequential_mlp_scripted.pt", dir + "/m.pt");
  const std::string in_ts = "cd " + dir + "/ts && " + PIPEBAL_BINARY;
  ASSERT_EQ(run_executable(in_ts, "profile --model m.pt --input-shape 4,8 --repeat 2 -q -o p.json")
                .status,
            0);
  ASSERT_EQ(run_executable(in_ts, "balance p.json --stages 2 -o plan.json").status, 0);
  const std::string absolute = std::filesystem::canonical(dir + "/ts/m.pt").string();
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/ts/plan.json"))["model"], absolute);
  const std::string in_dir = "cd " + dir + " && " + PIPEBAL_BINARY;
  const std::string train = " --steps 1 --warmup-steps 0 -q -o run.json";
  for (const std::string& model :
       {std::string(""), std::string(" --model ts/m.pt"), " --model " + dir + "/ts/../ts/m.pt"}) {
    const CliResult r = run_executable(in_dir, "train --plan ts/plan.json" + model + train);
    EXPECT_EQ(r.status, 0) << model << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/run.json"))["model"], absolute) << model;
  }
  expect_one_line_error(run_executable(in_dir, "train --plan ts/plan.json --model m.pt" + train),
                        "--model m.pt differs from the model the plan was made for (" + absolute,
                        "another file of the same name");
}

// A plan an earlier pipebal made may name its TorchScript file by a relative path: it is read
// from the current directory, and the run says which file that is unless --model names it.
TEST(TrustCli, APlanNamingItsModelRelativelySaysWhichFileItReads) {
  const std::string dir = scratch_dir();
  std::filesystem::copy_file(kFixtures + "/chain_named_traced.pt", dir + "/m.pt");
  const std::string here = "cd " + dir + " && " + PIPEBAL_BINARY;
  ASSERT_EQ(
      run_executable(here, "profile --model m.pt --input-shape 4,8 --repeat 2 -q -o p.json").status,
      0);
  ASSERT_EQ(run_executable(here, "balance p.json --stages 2 -o plan.json").status, 0);
  nlohmann::json plan = nlohmann::json::parse(read_text(dir + "/plan.json"));
  plan["model"] = "m.pt";  // as plans named it before they named it absolutely
  std::ofstream(dir + "/plan.json") << plan.dump();
  const std::string train = " --steps 1 --warmup-steps 0 -q -o run.json";
  const std::string absolute = std::filesystem::canonical(dir + "/m.pt").string();
  const CliResult r = run_executable(here, "train --plan plan.json" + train);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err,
            "pipebal: warning: plan.json names its model by a relative path (m.pt), read "
            "from the current directory: " +
                absolute +
                "; give --model to name the file (plans made now name it by its absolute "
                "path)\n");
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/run.json"))["model"], absolute);
  const CliResult named = run_executable(here, "train --plan plan.json --model m.pt" + train);
  EXPECT_EQ(named.status, 0) << named.err;
  EXPECT_EQ(named.err, "");
  // validate --plans takes no --model: it says which file it reads, and how to name another.
  std::filesystem::copy_file(dir + "/plan.json", dir + "/again.json");
  const CliResult compared =
      run_executable(here, "validate --plans plan.json --steps 1 --warmup-steps 0 -o v");
  EXPECT_EQ(compared.status, 0) << compared.err;
  EXPECT_EQ(compared.err,
            "pipebal: warning: plan.json names its model by a relative path (m.pt), read from "
            "the current directory: " +
                absolute +
                "; run from the directory it was made in, or balance it again (plans made now "
                "name it by its absolute path)\n");
  // Said once for the plans that name one path.
  const CliResult both = run_executable(
      here, "validate --plans plan.json again.json --steps 1 --warmup-steps 0 -o v2");
  EXPECT_EQ(both.status, 0) << both.err;
  EXPECT_EQ(both.err,
            "pipebal: warning: plan.json, again.json name their model by a relative path (m.pt), "
            "read from the current directory: " +
                absolute +
                "; run from the directory they were made in, or balance them again (plans made "
                "now name it by its absolute path)\n");
}

// A trained model that cannot be written (the file-size limit here, a full disk alike) is one
// line and exit 2, with no temporary file left: LibTorch's file writer throws from its destructor
// then, which aborted the process.
TEST(TrustCli, ASaveThatCannotBeWrittenIsOneLine) {
  const std::string dir = scratch_dir();
  const std::string args = "train --model " + kFixtures +
                           "/chain_named_traced.pt --input-shape 4,8 --balance 2,1 --steps 1 "
                           "--warmup-steps 0 -q --save " +
                           dir + "/s.pt";
  const CliResult r =
      run_executable("trap '' XFSZ; ulimit -f 4; exec " + std::string(PIPEBAL_BINARY), args);
  expect_one_line_error(r, "cannot write '" + dir + "/s.pt'", args);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().rfind("s.pt", 0), std::string::npos) << entry.path();
  }
}

// --save, -o and --trace land together or not at all: with a file-size limit only the run
// document (written last) exceeds, the run fails with one line, and the model and trace it wrote
// before stay unplaced (the earlier run's are kept, no temporaries left).
TEST(TrustCli, TrainsOutputsLandTogetherOrNotAtAll) {
  const std::string dir = scratch_dir();
  const std::string args = "train --model " + kFixtures +
                           "/chain_named_traced.pt --input-shape 4,8 --balance 2,1 --steps 100 "
                           "--warmup-steps 0 -q --save " +
                           dir + "/s.pt -o " + dir + "/r.json --trace " + dir + "/t.json";
  ASSERT_EQ(run_pipebal(args).status, 0);
  const auto size = [&dir](const char* name) {
    return std::filesystem::file_size(dir + "/" + name);
  };
  const uintmax_t others = std::max(size("s.pt"), size("t.json"));
  ASSERT_GT(size("r.json"), others + 1024) << "the run document must be the largest here";
  const std::string earlier_model = read_text(dir + "/s.pt");
  const std::string earlier_trace = read_text(dir + "/t.json");

  const CliResult r =
      run_executable(fmt::format("prlimit --fsize={} {}", others + 512, PIPEBAL_BINARY), args);
  expect_one_line_error(r, "cannot write '" + dir + "/r.json'", args);
  EXPECT_EQ(read_text(dir + "/s.pt"), earlier_model);
  EXPECT_EQ(read_text(dir + "/t.json"), earlier_trace);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST(TrustCli, AChainModelTrainsAndAMissingInputIsNamed) {
  const std::string dir = scratch_dir();
  const CliResult r = run_pipebal("train --model " + kFixtures +
                                  "/chain_two_inputs_scripted.pt --input-shape 4,4 "
                                  "--balance 1,1 --chunks 2 --steps 1 --warmup-steps 0 -q");
  expect_one_line_error(r, "layer 0 ('join', Join)", "train two inputs");
  EXPECT_NE(r.err.find("it takes 2 tensor(s), given 1"), std::string::npos) << r.err;
  const CliResult ok = run_pipebal("train --model " + kFixtures +
                                   "/chain_named_traced.pt --input-shape 4,8 --balance 2,1 "
                                   "--chunks 2 --steps 1 --warmup-steps 0 -q -o " +
                                   dir + "/run.json");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// Models that are not chains of their children, cut at their module calls: a traced U-Net
// whose decoder takes encoder outputs as extra arguments, and a GPT with a position parameter,
// residual adds and dropout between blocks of a ModuleList. The skips cross the cuts: the
// profile counts their bytes where they do.
TEST(TrustCli, ACutModelGoesThroughEveryCommand) {
  struct Model {
    std::string file, input, layers;
  };
  for (const Model& m :
       {Model{"split_unet_traced", "float32[8,3,8,8]", "stem,down1,down2,up2,up1,head"},
        Model{"split_gpt_scripted", "int64[8,12]:50",
              "tok,blocks.0,blocks.1,blocks.2,norm,head"}}) {
    const std::string dir = scratch_dir();
    const std::string model =
        "--model " + kFixtures + "/" + m.file + ".pt --input '" + m.input + "'";
    CliResult r = run_pipebal("profile " + model + " --chunks 2 --repeat 2 --warmup 1 -q -o " +
                              dir + "/profile.json");
    ASSERT_EQ(r.status, 0) << m.file << ": " << r.err;
    const auto profile = nlohmann::json::parse(read_text(dir + "/profile.json"));
    std::string names;
    for (const auto& layer : profile["layers"]) {
      names += (names.empty() ? "" : ",") + layer["name"].get<std::string>();
    }
    EXPECT_EQ(names, m.layers);
    if (m.file == "split_unet_traced") {
      // After down1 two encoder outputs travel on: [4, 4, 8, 8] and [4, 4, 4, 4] floats.
      EXPECT_EQ(profile["layers"][1]["output_bytes"], 4 * (4 * 8 * 8 + 4 * 4 * 4) * 4);
    }
    r = run_pipebal("balance " + dir + "/profile.json --stages 3 -o " + dir + "/plan.json");
    ASSERT_EQ(r.status, 0) << m.file << ": " << r.err;
    r = run_pipebal("train --plan " + dir + "/plan.json --steps 2 --warmup-steps 0 -q -o " + dir +
                    "/run.json");
    ASSERT_EQ(r.status, 0) << m.file << ": " << r.err;
    const auto run = nlohmann::json::parse(read_text(dir + "/run.json"));
    for (const auto& step : run["steps"]) EXPECT_TRUE(std::isfinite(step["loss"].get<double>()));
    r = run_pipebal("validate " + model +
                    " --stages 2 --chunks 2 --profile-repeat 2 --steps 2 --warmup-steps 0 -o " +
                    dir + "/validated");
    EXPECT_EQ(r.status, 0) << m.file << ": " << r.err;
  }
}

// --dtype converts the model and its floating inputs; the profile's dtype goes into the plan,
// which train --plan follows (and a different --dtype is refused); validate trains in it too.
TEST(TrustCli, DtypeFollowsTheProfileIntoThePlanAndTheRun) {
  const std::string dir = scratch_dir();
  const std::string model = "--model " + kFixtures + "/chain_named_scripted.pt";
  CliResult r = run_pipebal("profile " + model +
                            " --input-shape 8,8 --dtype float64 --repeat 2 --warmup 1 -q -o " +
                            dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/profile.json"))["dtype"], "float64");
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/plan.json"))["dtype"], "float64");
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 1 --warmup-steps 0 -q -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto run = nlohmann::json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["dtype"], "float64");
  EXPECT_EQ(run["inputs"], nlohmann::json({"float64[8,8]"}));
  expect_one_line_error(
      run_pipebal("train --plan " + dir + "/plan.json --dtype float32 --steps 1 -q"),
      "--dtype float32 differs from the dtype the plan was measured in (float64)", "train --dtype");
  expect_one_line_error(run_pipebal("train " + model + " --input-shape 8,8 --dtype int64 -q"),
                        "dtype 'int64': expected float32, float64, float16 or bfloat16",
                        "train --dtype int64");
  // Without --dtype a model trains as it was saved: float32 here.
  r = run_pipebal("train " + model + " --input-shape 8,8 --balance 2,1 --steps 1 -q -o " + dir +
                  "/plain.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto plain = nlohmann::json::parse(read_text(dir + "/plain.json"));
  EXPECT_FALSE(plain.contains("dtype"));
  EXPECT_EQ(plain["inputs"], nlohmann::json({"float32[8,8]"}));
  r = run_pipebal("validate " + model +
                  " --input-shape 8,8 --dtype double --stages 2 --chunks 2 --profile-repeat 2 "
                  "--steps 1 --warmup-steps 0 -o " +
                  dir + "/validated");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/validated/run.json"))["dtype"], "float64");
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/validated/plan.json"))["dtype"], "float64");
}

// A model of token ids has no floating input: the profile records its parameters' dtype, so
// that its plan too refuses to train in another.
TEST(TrustCli, TokenModelsRecordTheirParametersDtype) {
  const std::string dir = scratch_dir();
  CliResult r = run_pipebal(
      "profile --model gpt:layers=1,dim=16,heads=2,seq=8 --input int64[4,8]:50 --repeat 2 "
      "--warmup 1 -q -o " +
      dir + "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/profile.json"))["dtype"], "float32");
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/plan.json"))["dtype"], "float32");
  expect_one_line_error(
      run_pipebal("train --plan " + dir + "/plan.json --dtype float64 --steps 1 -q"),
      "--dtype float64 differs from the dtype the plan was measured in (float32)",
      "train --dtype of a token model");
}

TEST(TrustCli, TorchScriptFailureNamesTheLayerAndTheCause) {
  const std::string args =
      "profile --model " + kFixtures + "/sequential_mlp_scripted.pt --input-shape 4,7 -q";
  const CliResult r = run_pipebal(args);
  expect_one_line_error(r, "layer 0 ('0', Linear)", args);
  EXPECT_NE(r.err.find("RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("The following operation failed"), std::string::npos) << r.err;
}

// profile records what it was measured for; balance plans that batch, refuses another
// micro-batch size, and train --plan runs the model and input of the plan.
TEST(TrustCli, ProfilePlanAndTrainAgreeOnModelAndMicroBatches) {
  const std::string dir = scratch_dir();
  const std::string model = "mlp:layers=3,width=8";
  CliResult r = run_pipebal("profile --model " + model +
                            " --input-shape 16,8 --chunks 4 --repeat 2 --warmup 1 -q -o " + dir +
                            "/profile.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto profile = nlohmann::json::parse(read_text(dir + "/profile.json"));
  EXPECT_EQ(profile["chunks"], 4);
  EXPECT_EQ(profile["micro_batch_size"], 4);
  EXPECT_EQ(profile["mini_batch_size"], 16);
  EXPECT_EQ(profile["input_shape"], nlohmann::json({16, 8}));

  // No --chunks: the profile's 4, not another default.
  r = run_pipebal("balance " + dir + "/profile.json --stages 2 -o " + dir + "/plan.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("4 micro-batches"), std::string::npos) << r.out;
  const auto plan = nlohmann::json::parse(read_text(dir + "/plan.json"));
  EXPECT_EQ(plan["chunks"], 4);
  EXPECT_EQ(plan["model"], "mlp:layers=3,width=8,classes=10");
  EXPECT_EQ(plan["input_shape"], nlohmann::json({16, 8}));
  std::vector<std::string> names;
  for (const auto& stage : plan["stages"]) {
    for (const auto& name : stage["layer_names"]) names.push_back(name);
    EXPECT_EQ(stage["layer_names"].size(), stage["layers"].get<size_t>());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fc0", "fc1", "fc2", "head"}));

  // Another micro-batch size is refused with both numbers; the same one (rounded) is not.
  expect_one_line_error(run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 8"),
                        "measured at micro-batch size 4 (16 samples in 4 chunks); --chunks 8 means "
                        "micro-batches of 2",
                        "balance --chunks 8");
  EXPECT_EQ(run_pipebal("balance " + dir + "/profile.json --stages 2 --chunks 4").status, 0);

  // train --plan takes model and input from the plan, and refuses others.
  r = run_pipebal("train --plan " + dir + "/plan.json --steps 1 --warmup-steps 0 -q -o " + dir +
                  "/run.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto run = nlohmann::json::parse(read_text(dir + "/run.json"));
  EXPECT_EQ(run["model"], "mlp:layers=3,width=8,classes=10");
  EXPECT_EQ(run["input_shape"], nlohmann::json({16, 8}));
  EXPECT_EQ(run["chunks"], 4);
  EXPECT_EQ(run_pipebal("train --plan " + dir +
                        "/plan.json --model mlp:width=8,layers=3 "
                        "--steps 1 --warmup-steps 0 -q")
                .status,
            0)
      << "the same model, written differently";
  expect_one_line_error(run_pipebal("train --plan " + dir + "/plan.json --model mlp:layers=4 -q"),
                        "--model mlp:layers=4 differs from the model the plan was made for",
                        "train --plan --model");
  expect_one_line_error(run_pipebal("train --plan " + dir + "/plan.json --input-shape 8,8 -q"),
                        "--input-shape 8,8 differs from the input the plan was made for (16,8)",
                        "train --plan --input-shape");
}

TEST(TrustCli, EveryCommandDefaultsToTheSameChunks) {
  for (const std::string command : {"profile", "balance", "train", "validate"}) {
    const CliResult r = run_pipebal(command + " --help");
    ASSERT_EQ(r.status, 0) << command;
    const auto at = r.out.find("--chunks");
    ASSERT_NE(at, std::string::npos) << command;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find('4'), std::string::npos) << command << ": " << line;
  }
}

// Off a terminal, progress comes as flushed lines on stderr; --quiet silences it.
TEST(TrustCli, ProgressIsPrintedAsItGoesAndQuietSilencesIt) {
  const std::string args =
      "profile --model mlp:layers=2,width=8 --input-shape 8,8 --repeat 3 --warmup 1";
  const CliResult r = run_pipebal(args);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string line :
       {"memory and warm-up, layer 1 of 3 (fc0)", "memory and warm-up, layer 3 of 3 (head)",
        "warm-up pass 1 of 1", "timed pass 3 of 3"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << line << "\n" << r.err;
  }
  EXPECT_NE(r.err.find("elapsed"), std::string::npos);
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no live line off a terminal";
  const CliResult quiet = run_pipebal(args + " --quiet");
  ASSERT_EQ(quiet.status, 0);
  EXPECT_EQ(quiet.err, "");
  EXPECT_NE(quiet.out.find("fc0"), std::string::npos) << "the table is still printed";
}

}  // namespace
}  // namespace pipebal::testing
