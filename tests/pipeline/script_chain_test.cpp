// The loader's table of model shapes: a TorchScript module whose forward is a chain of its
// children runs faithfully (the layers' outputs equal forward's, computed in Python); any
// other forward is refused with a reason that names where the chain breaks. Never a silent
// substitute.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "pipeline/error_text.h"
#include "pipeline/script_layer.h"

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

class Chain : public ::testing::TestWithParam<std::string> {};

TEST_P(Chain, LayersEqualTheModulesForward) {
  ScriptModel model = load_script_model(kFixtures + "/" + GetParam() + ".pt");
  torch::jit::Module holder = torch::jit::load(kFixtures + "/" + GetParam() + ".expected.pt");
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
  EXPECT_NO_THROW(check_matches_reference(model.layers, model.reference, input, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Loader, Chain,
                         ::testing::Values("chain_named_scripted", "chain_named_traced",
                                           "chain_tuple_scripted", "chain_last_tuple_scripted",
                                           "chain_two_inputs_scripted"));

struct Refusal {
  std::string fixture;
  std::string reason;  // a fragment the one-line error must contain
};

class NotAChain : public ::testing::TestWithParam<Refusal> {};

TEST_P(NotAChain, IsRefusedWithTheReason) {
  const std::string path = kFixtures + "/" + GetParam().fixture + ".pt";
  try {
    load_script_model(path);
    FAIL() << "accepted " << GetParam().fixture;
  } catch (const std::invalid_argument& error) {
    const std::string what = error.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("is not a chain of its children"), std::string::npos) << what;
    EXPECT_NE(what.find(GetParam().reason), std::string::npos) << what;
    EXPECT_NE(what.find("Export a module whose forward calls each top-level child once"),
              std::string::npos)
        << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Loader, NotAChain,
    ::testing::Values(
        Refusal{"nonchain_residual_scripted", "computes aten::add after child 1 'fc2'"},
        Refusal{"nonchain_residual_traced", "computes aten::add after child 1 'fc2'"},
        Refusal{"nonchain_reuse_scripted", "calls child 0 'fc' a second time"},
        Refusal{"nonchain_unused_output_scripted",
                "child 1 'main' does not take exactly the outputs of child 0 'side'"},
        Refusal{"nonchain_two_arguments_scripted",
                "child 0 'a' does not take exactly forward's inputs"},
        Refusal{"nonchain_if_on_data_scripted", "control flow (an if)"},
        Refusal{"nonchain_loop_scripted", "control flow (a loop)"},
        Refusal{"nonchain_out_of_order_scripted", "calls child 1 'first' before child 0 'second'"},
        Refusal{"nonchain_op_between_scripted", "computes aten::relu after child 0 'fc1'"},
        Refusal{"nonchain_uncalled_child_scripted", "never calls child 1 'spare'"},
        Refusal{"nonchain_module_list_scripted", "calls a module inside child 0 'blocks'"}),
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
