// The loader's table of model shapes: a TorchScript module is cut into layers at its module
// calls (script_split.h) and runs faithfully: the layers' outputs equal forward's, computed in
// Python, and a pipelined step's loss and gradients equal forward's in float64. A forward that
// cannot be cut is refused with the reason. Never a silent substitute.
#include <numeric>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/script_layer.h"

namespace pipebal::pipeline {
namespace {

const std::string kFixtures = PIPEBAL_FIXTURES_DIR;

// input0, input1, ... and output0, output1, ... of an ExpectedOutputs fixture.
std::vector<at::Tensor> numbered(torch::jit::Module& holder, const std::string& prefix) {
  std::vector<at::Tensor> all;
  for (int i = 0; holder.hasattr(prefix + std::to_string(i)); ++i) {
    all.push_back(holder.attr(prefix + std::to_string(i)).toTensor());
  }
  return all;
}

struct Cut {
  std::string fixture;
  std::string layers;  // the layers' names, comma-separated
};

void PrintTo(const Cut& cut, std::ostream* os) {
  *os << cut.fixture;
}

class Split : public ::testing::TestWithParam<Cut> {};

TEST_P(Split, LayersEqualTheModulesForward) {
  const std::string& fixture = GetParam().fixture;
  ScriptModel model = load_script_model(kFixtures + "/" + fixture + ".pt");
  std::vector<std::string> names;
  for (size_t i = 0; i < model.layers.size(); ++i) names.push_back(model.layers[i].name());
  EXPECT_EQ(fmt::format("{}", fmt::join(names, ",")), GetParam().layers);
  EXPECT_NO_THROW(model.layers.check_skips());

  torch::jit::Module holder = torch::jit::load(kFixtures + "/" + fixture + ".expected.pt");
  const Batch input(numbered(holder, "input"));
  const std::vector<at::Tensor> expected = numbered(holder, "output");
  ASSERT_FALSE(expected.empty());

  model.layers.train(false);
  torch::NoGradGuard no_grad;
  const std::vector<at::Tensor> staged = model.layers.forward(input).tensors;
  ASSERT_EQ(staged.size(), expected.size());
  for (size_t t = 0; t < expected.size(); ++t) {
    EXPECT_TRUE(torch::allclose(staged[t], expected[t], 1e-5, 1e-6)) << "output " << t;
  }
  // The check every command runs on its sample agrees.
  EXPECT_NO_THROW(check_matches_reference(model.layers, model.reference, input, fixture));
}

// Every layer on a stage of its own where there are three or fewer, so each skip crosses
// stages; a pipelined step on one micro-batch per sample gives forward's loss and gradients.
TEST_P(Split, PipelinedStepEqualsTheModulesForwardInFloat64) {
  const std::string& fixture = GetParam().fixture;
  ScriptModel model = load_script_model(kFixtures + "/" + fixture + ".pt");
  torch::jit::Module holder = torch::jit::load(kFixtures + "/" + fixture + ".expected.pt");
  std::vector<at::Tensor> inputs = numbered(holder, "input");
  if (numbered(holder, "output").size() != 1) GTEST_SKIP() << "the loss takes one output";
  for (at::Tensor& t : inputs) {
    if (t.is_floating_point()) t = t.to(torch::kDouble);
  }
  model.layers.to(torch::kDouble);
  model.layers.train(false);  // no dropout: the same masks are not the point here
  const Batch input(inputs);
  torch::manual_seed(7);
  const at::Tensor target = torch::randn_like(model.reference(input)[0]);
  const LossFn mse = [](const at::Tensor& output, const at::Tensor& want) {
    return torch::mse_loss(output, want);
  };

  const at::Tensor expected_loss = mse(model.reference(input)[0], target);
  expected_loss.backward();
  std::vector<at::Tensor> expected_grads;
  for (at::Tensor& p : model.layers.parameters()) {
    // A module whose output forward drops gets no gradient.
    expected_grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    p.mutable_grad() = at::Tensor();
  }

  const int layers = static_cast<int>(model.layers.size());
  const int stages = std::min(layers, 3);
  std::vector<int> balance(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++balance[s];
  PipelineOptions options;
  options.chunks = static_cast<int>(input.size());
  options.schedule = ScheduleKind::kOneFOneB;
  Pipeline pipeline(model.layers, balance, {}, options);
  const StepResult result = pipeline.step(input, target, mse);
  EXPECT_NEAR(result.loss, expected_loss.item<double>(), 1e-12);
  const std::vector<at::Tensor> params = model.layers.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor grad =
        params[i].grad().defined() ? params[i].grad() : torch::zeros_like(params[i]);
    EXPECT_TRUE(torch::allclose(grad, expected_grads[i], 1e-9, 1e-12)) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Loader, Split,
    ::testing::Values(
        Cut{"chain_named_scripted", "fc1,act,head"}, Cut{"chain_named_traced", "fc1,act,head"},
        Cut{"chain_tuple_scripted", "split,join"}, Cut{"chain_last_tuple_scripted", "0,1"},
        Cut{"chain_two_inputs_scripted", "join,head"},
        Cut{"split_residual_scripted", "fc1,fc2,head"},
        Cut{"split_residual_traced", "fc1,fc2,head"},
        // One module called twice is one layer.
        Cut{"split_reuse_scripted", "fc,head"}, Cut{"split_unused_output_scripted", "side,main"},
        Cut{"split_two_arguments_scripted", "a,b"},
        // The order of the calls, not of registration.
        Cut{"split_out_of_order_scripted", "first,second"},
        Cut{"split_op_between_scripted", "fc1,fc2"}, Cut{"split_uncalled_child_scripted", "fc"},
        Cut{"split_module_list_scripted", "blocks.0,blocks.1"},
        Cut{"split_unet_traced", "stem,down1,down2,up2,up1,head"},
        Cut{"split_gpt_scripted", "tok,blocks.0,blocks.1,blocks.2,norm,head"},
        // The head reads the embedding's weight: embedding to head is one layer.
        Cut{"split_tied_scripted", "emb+mid"},
        // h is written in place after act read it.
        Cut{"split_in_place_across_scripted", "fc+act,head"}),
    [](const ::testing::TestParamInfo<Cut>& info) { return info.param.fixture; });

struct Refusal {
  std::string fixture;
  std::string reason;  // a fragment the one-line error must contain
};

void PrintTo(const Refusal& refusal, std::ostream* os) {
  *os << refusal.fixture;
}

class Uncuttable : public ::testing::TestWithParam<Refusal> {};

TEST_P(Uncuttable, IsRefusedWithTheReason) {
  const std::string path = kFixtures + "/" + GetParam().fixture + ".pt";
  try {
    load_script_model(path);
    FAIL() << "accepted " << GetParam().fixture;
  } catch (const std::invalid_argument& error) {
    const std::string what = error.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("cannot be cut into layers: " + GetParam().reason), std::string::npos)
        << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Loader, Uncuttable,
    ::testing::Values(
        Refusal{"refused_if_on_data_scripted",
                "forward uses its modules inside control flow (an if)"},
        Refusal{"refused_loop_scripted", "forward uses its modules inside control flow (a loop)"},
        Refusal{"refused_own_method_scripted", "forward calls the model's own method 'helper'"},
        Refusal{"refused_float_argument_scripted", "forward's argument 'scale' is a float"},
        Refusal{"refused_no_module_scripted", "its forward calls no module"}),
    [](const ::testing::TestParamInfo<Refusal>& info) { return info.param.fixture; });

// The sample check catches what the graph cannot show: a reference that disagrees.
TEST(CheckMatchesReference, ADifferentOutputIsRefusedAndTrainingModeRestored) {
  ScriptModel model = load_script_model(kFixtures + "/chain_named_scripted.pt");
  const Batch sample(torch::randn({2, 8}));
  const ReferenceForward off_by_one = [&](const Batch& input) {
    std::vector<at::Tensor> out = model.reference(input);
    out[0] = out[0] + 1e-3;
    return out;
  };
  try {
    check_matches_reference(model.layers, off_by_one, sample, "m.pt");
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("model 'm.pt'"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("largest difference 0.001"), std::string::npos)
        << error.what();
  }
  EXPECT_TRUE(model.layers[0].is_training());
  const ReferenceForward one_tensor_too_many = [&](const Batch& input) {
    std::vector<at::Tensor> out = model.reference(input);
    out.push_back(out[0]);
    return out;
  };
  EXPECT_THROW(check_matches_reference(model.layers, one_tensor_too_many, sample, "m.pt"),
               std::invalid_argument);
}

// A TorchScript failure is reported by its cause, not the interpreter's generic header.
TEST(ErrorSummary, TorchScriptFailureGivesTheCause) {
  ScriptModel model = load_script_model(kFixtures + "/chain_named_scripted.pt");
  try {
    model.layers.forward(Batch(torch::randn({2, 5})));
    FAIL();
  } catch (const std::exception& error) {
    const std::string summary = error_summary(error);
    EXPECT_NE(summary.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
        << summary;
    EXPECT_EQ(summary.find("The following operation failed"), std::string::npos);
    EXPECT_EQ(summary.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace pipebal::pipeline
