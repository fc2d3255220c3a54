// Reading cost profiles: the pipebal format, hand-written documents, and every malformed input.
#include "pipebal/balance/profile_reader.h"

#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "tests/support/scratch_dir.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

json layer(double forward_ms) {
  return {{"name", "fc"},       {"type", "Linear"},    {"forward_ms", forward_ms},
          {"backward_ms", 2.5}, {"param_bytes", 4096}, {"activation_bytes", 1024},
          {"output_bytes", 512}};
}

json profile() {
  return {{"schema", "pipebal.profile/1"},
          {"model", "mlp:layers=2"},
          {"batch_size", 8},
          {"layers", {layer(1.0), layer(1.5)}}};
}

void expect_error(const json& doc, const std::string& message) {
  try {
    profile_from_json(doc);
    FAIL() << "expected std::invalid_argument containing: " << message;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(ProfileReader, ReadsAPipebalProfile) {
  const CostProfile p = profile_from_json(profile());
  EXPECT_EQ(p.model, "mlp:layers=2");
  EXPECT_EQ(p.batch_size, 8);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.layers[1].name, "fc");
  EXPECT_EQ(p.layers[1].type, "Linear");
  EXPECT_DOUBLE_EQ(p.layers[1].forward_ms, 1.5);
  EXPECT_DOUBLE_EQ(p.layers[1].backward_ms, 2.5);
  EXPECT_EQ(p.layers[1].param_bytes, 4096);
  EXPECT_EQ(p.layers[1].activation_bytes, 1024);
  EXPECT_EQ(p.layers[1].output_bytes, 512);
  // B's own time is optional: -1 where the profile has none (B is then backward - W).
  EXPECT_DOUBLE_EQ(p.layers[1].input_grad_ms, -1);
  json doc = profile();
  doc["layers"][1]["input_grad_ms"] = 2.0;
  EXPECT_DOUBLE_EQ(profile_from_json(doc).layers[1].input_grad_ms, 2.0);
}

// On the CPU the engine's first stage takes views of the caller's batch: a CPU profile's first
// layer holds none of the model's input, an accelerator's holds its copy.
TEST(ProfileReader, TheFirstStageHoldsTheModelsInputOnlyOnAnAccelerator) {
  json doc = profile();
  doc["layers"][0]["input_bytes"] = 300;
  doc["layers"][1]["input_bytes"] = 512;
  doc["device"] = "cuda:0";
  EXPECT_EQ(profile_from_json(doc).layers[0].input_bytes, 300);
  doc["device"] = "cpu";
  const CostProfile cpu = profile_from_json(doc);
  EXPECT_EQ(cpu.layers[0].input_bytes, 0);
  EXPECT_EQ(cpu.layers[1].input_bytes, 512);
}

TEST(ProfileReader, AcceptsAHandWrittenDocumentWithoutSchemaOrNames) {
  json doc = {{"layers", {layer(1.0)}}};
  doc["layers"][0].erase("name");
  doc["layers"][0].erase("type");
  doc["layers"][0]["param_bytes"] = 4096.0;  // integral doubles are fine
  const CostProfile p = profile_from_json(doc);
  EXPECT_EQ(p.layers[0].name, "");  // none made up: a plan would hold it against the model
  EXPECT_EQ(p.layers[0].type, "");
  EXPECT_EQ(p.layers[0].param_bytes, 4096);
  EXPECT_EQ(p.batch_size, 0);
}

TEST(ProfileReader, RejectsAnotherSchemaOrMajorVersion) {
  json doc = profile();
  doc["schema"] = "pipebal.profile/2";
  expect_error(doc, "unsupported schema version \"pipebal.profile/2\"");
  doc["schema"] = "pipebal.plan/1";
  expect_error(doc, "unexpected schema \"pipebal.plan/1\"");
  doc["schema"] = "pipebal.profile/1.3";  // a newer minor version is fine
  EXPECT_NO_THROW(profile_from_json(doc));
}

TEST(ProfileReader, NamesTheLayerAndFieldOfEveryBadValue) {
  json doc = profile();
  doc["layers"][1].erase("output_bytes");
  expect_error(doc, "missing \"layers[1].output_bytes\"");
  doc = profile();
  doc["layers"][0]["forward_ms"] = "fast";
  expect_error(doc, "layers[0].forward_ms must be a number, not string");
  doc = profile();
  doc["layers"][1]["backward_ms"] = -0.5;
  expect_error(doc, "layers[1].backward_ms is -0.5, expected a finite number >= 0");
  doc = profile();
  doc["layers"][0]["param_bytes"] = -4;
  expect_error(doc, "layers[0].param_bytes is -4, expected 0 to");
  doc = profile();
  doc["layers"][0]["activation_bytes"] = 10.5;
  expect_error(doc, "layers[0].activation_bytes must be an integer, not 10.5");
  doc = profile();
  doc["layers"][1]["output_bytes"] = true;
  expect_error(doc, "layers[1].output_bytes must be an integer, not boolean");
  doc = profile();
  doc["layers"][1]["carried_bytes"] = -3;
  expect_error(doc, "layers[1].carried_bytes is -3, expected 0 to");
  doc["layers"][1]["carried_bytes"] = 0;
  doc["layers"][1]["released_output_bytes"] = -1;
  expect_error(doc, "layers[1].released_output_bytes is -1, expected 0 to");
  doc = profile();
  doc["layers"][0]["input_grad_ms"] = -0.5;
  expect_error(doc, "layers[0].input_grad_ms is -0.5, expected a finite number >= 0");
  doc = profile();
  doc["layers"][1]["input_grad_bytes"] = "all";
  expect_error(doc, "layers[1].input_grad_bytes must be an integer, not string");
  doc = profile();
  doc["layers"][1]["name"] = 3;
  expect_error(doc, "layers[1].name has the wrong type (number)");
  doc = profile();
  doc["layers"][0] = 7;
  expect_error(doc, "layers[0] is not an object (number)");
  // A device pipebal does not run on decides nothing.
  doc = profile();
  for (const char* device : {"cpu", "cpu:0", "cuda", "cuda:0", "cuda:1"}) {
    doc["device"] = device;
    EXPECT_EQ(profile_from_json(doc).device, device);
  }
  for (const char* device : {"tpu", "cuda:", "cuda:x", "cpux", "CPU"}) {
    doc["device"] = device;
    expect_error(doc, fmt::format("device is \"{}\", expected cpu or cuda", device));
  }
  // Layers moved by hand: each keeps the index of its place in the model.
  doc = profile();
  doc["layers"][0]["index"] = 1;
  doc["layers"][1]["index"] = 0;
  expect_error(doc, "layers[0].index is 1, expected 0: layers are listed in model order, from 0");
  doc["layers"][0]["index"] = "first";
  expect_error(doc, "layers[0].index must be an integer, not string");
  doc["layers"][0]["index"] = 0;
  doc["layers"][1]["index"] = 1;
  EXPECT_EQ(profile_from_json(doc).layers.size(), 2u);
  doc = profile();
  for (json& layer : doc["layers"]) layer["forward_ms"] = layer["backward_ms"] = 0.0;
  expect_error(doc, "layers has no cost: every layer's forward_ms and backward_ms is 0");
  // Inputs that train would refuse, or that contradict input_shape.
  doc = profile();
  doc["inputs"] = {"garbage"};
  expect_error(doc, "inputs[0] 'garbage': expected DTYPE[SHAPE] or DTYPE[SHAPE]:HIGH");
  doc["input_shape"] = {16, 8};
  doc["chunks"] = 2;
  doc["inputs"] = {"float32[32,8]"};
  expect_error(doc, "inputs[0] 'float32[32,8]' is not input_shape [16,8]");
  // A mini-batch without its shape: what plans need of it is input_shape (0: not said).
  doc = profile();
  doc["micro_batch_size"] = 8;
  doc["mini_batch_size"] = 0;
  EXPECT_EQ(profile_from_json(doc).mini_batch_size(), 0);
  doc["mini_batch_size"] = 32;
  expect_error(doc, "mini_batch_size is given without input_shape, the mini-batch's shape");
}

TEST(ProfileReader, ReadsTheEnginesCostsWhenTheProfileHasThem) {
  EXPECT_FALSE(profile_from_json(profile()).engine.has_value());
  json doc = profile();
  doc["engine"] = {{"step_ms", 0.25}, {"action_ms", 0.125}};
  const CostProfile p = profile_from_json(doc);
  ASSERT_TRUE(p.engine.has_value());
  EXPECT_DOUBLE_EQ(p.engine->step_ms, 0.25);
  EXPECT_DOUBLE_EQ(p.engine->action_ms, 0.125);
  EXPECT_DOUBLE_EQ(p.engine->handoff_ms, 0);  // a profile from before it was measured
  doc["engine"]["handoff_ms"] = 0.0625;
  EXPECT_DOUBLE_EQ(profile_from_json(doc).engine->handoff_ms, 0.0625);
  doc["engine"]["handoff_ms"] = -1;
  expect_error(doc, "engine.handoff_ms is -1, expected a finite number >= 0");
  doc["engine"]["handoff_ms"] = 1e13;
  expect_error(doc, "engine.handoff_ms is beyond any real step");
  doc["engine"].erase("handoff_ms");
  doc["engine"]["action_ms"] = -1;
  expect_error(doc, "engine.action_ms is -1, expected a finite number >= 0");
  doc["engine"] = {{"step_ms", 1e13}, {"action_ms", 0}};
  expect_error(doc, "engine.step_ms is beyond any real step");
  doc["engine"] = {{"step_ms", 0}};
  expect_error(doc, "missing \"engine.action_ms\"");
}

// The machine's load while profiling is context: read when it is one, no load when it is not
// (the environment is free-form), never an error.
TEST(ProfileReader, ReadsTheMachinesLoadWhenTheEnvironmentHasOne) {
  json doc = profile();
  EXPECT_FALSE(profile_from_json(doc).machine_load.has_value());
  doc["environment"]["machine_load"] = {
      {"seconds", 2.5}, {"cores", 2}, {"others_cores", 1.25}, {"steal_cores", 0.5}};
  const std::optional<MachineLoad> load = profile_from_json(doc).machine_load;
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->seconds, 2.5);
  EXPECT_EQ(load->cores, 2);
  EXPECT_DOUBLE_EQ(load->others_cores, 1.25);
  EXPECT_DOUBLE_EQ(load->steal_cores, 0.5);
  for (const json& odd : {json(nullptr), json("busy"), json::object()}) {
    doc["environment"]["machine_load"] = odd;
    EXPECT_FALSE(profile_from_json(doc).machine_load.has_value()) << odd.dump();
  }
  doc["environment"]["machine_load"] = {
      {"seconds", 2.5}, {"cores", 2}, {"others_cores", -1}, {"steal_cores", 0}};
  EXPECT_FALSE(profile_from_json(doc).machine_load.has_value());
}

TEST(ProfileReader, RejectsDocumentsWithoutLayers) {
  expect_error(json::array(), "expected a JSON object");
  expect_error(json{{"model", "x"}}, "missing \"layers\"");
  expect_error(json{{"layers", json::array()}}, "layers is empty");
}

TEST(ProfileReader, FileErrorsNameThePath) {
  EXPECT_THROW(read_profile("/nonexistent/profile.json"), std::invalid_argument);
  const std::string path = pipebal::testing::scratch_path("bad_profile.json");
  std::ofstream(path) << "{\"layers\": [";
  try {
    read_profile(path);
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(path + ": malformed JSON"), std::string::npos)
        << error.what();
  }
  std::ofstream(path) << json{{"layers", {{{"forward_ms", 1}}}}}.dump();
  try {
    read_profile(path);
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(path + ": missing \"layers[0].backward_ms\""),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace pipebal::balance
