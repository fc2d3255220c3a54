// The model zoo: every model trains forward and backward at a small size; SPEC parsing.
#include "pipebal/models/zoo.h"

#include <filesystem>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/models/synthetic.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::models {
namespace {

struct Case {
  std::string spec;
  std::vector<int64_t> input_shape;
  std::vector<int64_t> output_shape;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.spec;
}

class ZooModel : public ::testing::TestWithParam<Case> {};

TEST_P(ZooModel, ForwardAndBackwardGiveExpectedShapeAndFiniteGradients) {
  const Case& c = GetParam();
  Model model = build_model(c.spec, 1);
  SyntheticData data = make_synthetic_data(model, c.input_shape, 1);
  const at::Tensor out = model.layers.forward(data.input).value();
  EXPECT_EQ(out.sizes().vec(), c.output_shape);
  const at::Tensor loss = compute_loss(model.info.loss, out, data.target);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  const auto params = model.layers.parameters();
  std::vector<bool> moved(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_TRUE(torch::isfinite(params[i].grad()).all().item<bool>()) << "parameter " << i;
    moved[i] = params[i].grad().abs().sum().item<double>() > 0;
  }
  // Every parameter tensor takes part: its gradient is not all zero in training or in eval mode.
  // Both, because in training batch norm removes a constant shift of its input (a bias feeding a
  // 1x1 convolution and then batch norm, as in AmoebaNet's one-channel bottlenecks, has a
  // gradient that is zero in exact arithmetic), and in eval mode a ReLU may be dead on this batch.
  for (const auto& p : params) p.grad().zero_();
  model.layers.train(false);
  compute_loss(model.info.loss, model.layers.forward(data.input).value(), data.target).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(moved[i] || params[i].grad().abs().sum().item<double>() > 0) << "parameter " << i;
  }
}

TEST_P(ZooModel, SameSeedBuildsTheSameWeights) {
  const Model a = build_model(GetParam().spec, 7);
  const Model b = build_model(GetParam().spec, 7);
  const auto pa = a.layers.parameters(), pb = b.layers.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));
}

INSTANTIATE_TEST_SUITE_P(
    Small, ZooModel,
    ::testing::Values(Case{"mlp:layers=2,width=8,classes=3", {4, 8}, {4, 3}},
                      Case{"resnet:depth=18,width=4,classes=5", {2, 3, 32, 32}, {2, 5}},
                      Case{"resnet:depth=50,width=4,classes=5", {2, 3, 32, 32}, {2, 5}},
                      Case{"unet:B=2,C=4", {2, 3, 16, 16}, {2, 1, 16, 16}},
                      Case{"amoebanetd:L=1,D=8,classes=6", {2, 3, 32, 32}, {2, 6}},
                      Case{"gpt:layers=2,dim=16,heads=2,seq=8,vocab=11", {2, 8}, {2, 8, 11}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.spec.substr(0, info.param.spec.find(':')) + std::to_string(info.index);
    });

TEST(Zoo, MlpLayersMatchAHandWrittenReference) {
  Model model = build_model("mlp:layers=3,width=6,classes=2", 3);
  const at::Tensor x = torch::randn({5, 6});
  const auto p = model.layers.parameters();
  at::Tensor expected = x;
  for (int i = 0; i < 3; ++i) expected = torch::relu(expected.matmul(p[2 * i].t()) + p[2 * i + 1]);
  expected = expected.matmul(p[6].t()) + p[7];
  EXPECT_TRUE(torch::allclose(model.layers.forward(pipeline::Batch(x)).value(), expected));
}

TEST(Zoo, GptIsCausal) {
  Model model = build_model("gpt:layers=2,dim=16,heads=2,seq=8,vocab=11", 0);
  at::Tensor tokens = torch::randint(11, {1, 8}, torch::kLong);
  const at::Tensor a = model.layers.forward(pipeline::Batch(tokens)).value();
  tokens[0][7] = (tokens[0][7].item<int64_t>() + 1) % 11;
  const at::Tensor b = model.layers.forward(pipeline::Batch(tokens)).value();
  // Changing the last token changes only the last position's logits.
  EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 7), b.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(a.narrow(1, 7, 1), b.narrow(1, 7, 1)));
}

TEST(Zoo, ResNetHasOneLayerPerBlockPlusStemAndHead) {
  EXPECT_EQ(build_model("resnet:depth=18,width=4").layers.size(), 2u + 8u);
  EXPECT_EQ(build_model("resnet:depth=50,width=4").layers.size(), 2u + 16u);
  EXPECT_EQ(build_model("resnet:depth=152,width=2").layers.size(), 2u + 50u);
}

void expect_error(const std::string& spec, const std::string& fragment) {
  try {
    build_model(spec);
    FAIL() << "expected an error for " << spec;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(Zoo, SpecErrorsListWhatIsValid) {
  expect_error("transformerxl", "valid: mlp, resnet, unet, amoebanetd, gpt");
  expect_error("mlp:depth=3", "valid: layers, width, classes");
  expect_error("mlp:layers", "expected key=value");
  expect_error("mlp:layers=two", "expected an integer");
  expect_error("mlp:layers=0", "must be positive");
  expect_error("resnet:depth=20", "18, 34, 50, 101, 152");
  expect_error("gpt:dim=10,heads=4", "multiple of heads");
  // A percentage of dropout below 100 (every unit dropped would train nothing): one bound, one
  // message.
  expect_error("gpt:dropout=100", "model option dropout=100: at most 99 for gpt");
  expect_error("gpt:dropout=101", "model option dropout=101: at most 99 for gpt");
  expect_error("mlp:layers=2,layers=3",
               "model option 'layers' is given twice in 'mlp:layers=2,layers=3': give it once");
}

TEST(Zoo, SpecParsing) {
  const ModelSpec spec = parse_model_spec("gpt:layers=2,dim=32");
  EXPECT_EQ(spec.name, "gpt");
  EXPECT_EQ(spec.options.at("layers"), 2);
  EXPECT_EQ(spec.options.at("dim"), 32);
  // A TorchScript path is taken as given, and named by its absolute form.
  EXPECT_EQ(parse_model_spec("models/net.pt").path, "models/net.pt");
  EXPECT_EQ(canonical_spec("models/net.pt"),
            std::filesystem::weakly_canonical(std::filesystem::current_path() / "models/net.pt")
                .string());
  EXPECT_EQ(canonical_spec("models/../models/net.pt"), canonical_spec("models/net.pt"));
  EXPECT_EQ(describe(build_model("mlp:layers=2")), "mlp:layers=2,width=512,classes=10");
}

TEST(Zoo, ShapeMismatchNamesTheLayer) {
  Model model = build_model("mlp:layers=2,width=8");
  try {
    make_synthetic_data(model, {4, 9});
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("layer 0 ('fc0'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(parse_shape("4,,3"), std::invalid_argument);
  EXPECT_THROW(parse_shape("4,-3"), std::invalid_argument);
  EXPECT_EQ(parse_shape("32,3,64,64"), (std::vector<int64_t>{32, 3, 64, 64}));
}

// A layer that fails with a given LibTorch error, as an allocator or a missing kernel does.
struct FailsImpl : torch::nn::Module {
  explicit FailsImpl(std::string message, bool out_of_memory)
      : message(std::move(message)), out_of_memory(out_of_memory) {}
  at::Tensor forward(const at::Tensor&) {
    if (out_of_memory) C10_THROW_ERROR(OutOfMemoryError, message);
    C10_THROW_ERROR(Error, message);
  }
  std::string message;
  bool out_of_memory;
};
TORCH_MODULE(Fails);

std::string failure_on_sample(const std::string& message, bool out_of_memory,
                              const std::vector<int64_t>& shape = {2, 4}) {
  Model model;
  model.layers.add(pipeline::make_layer("boom", "Fails", Fails(message, out_of_memory)));
  try {
    check_model_on(model, pipeline::Batch(at::zeros(shape)));
    return "(no error)";
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
}

// What failed is said as what it is: memory the allocator refused (ours, LibTorch's, or through
// TorchScript by its text), a float16 kernel this LibTorch lacks (with the dtypes to use), or
// else the input the layer rejected.
TEST(Zoo, ALayersFailureSaysWhetherMemoryOrAKernelOrTheInput) {
  EXPECT_EQ(failure_on_sample("cannot allocate 4.00 TiB for one tensor", true),
            "layer 0 ('boom', Fails) ran out of memory: cannot allocate 4.00 TiB for one tensor; "
            "the input checked on its 2 samples, [4] each");
  EXPECT_EQ(failure_on_sample("RuntimeError: cannot allocate 9.00 GiB for a tensor", false),
            "layer 0 ('boom', Fails) ran out of memory: RuntimeError: cannot allocate 9.00 GiB for "
            "a tensor; the input checked on its 2 samples, [4] each");
  EXPECT_EQ(failure_on_sample("\"addmm_impl_cpu_\" not implemented for 'Half'", false),
            "layer 0 ('boom', Fails) rejected its input: \"addmm_impl_cpu_\" not implemented for "
            "'Half' (this LibTorch lacks that float16 kernel on this device: use --dtype bfloat16 "
            "or float32); the input checked on its 2 samples, [4] each");
  EXPECT_EQ(failure_on_sample("mat1 and mat2 shapes cannot be multiplied (2x4 and 8x8)", false),
            "layer 0 ('boom', Fails) rejected its input: mat1 and mat2 shapes cannot be multiplied "
            "(2x4 and 8x8); the input checked on its 2 samples, [4] each");
  // Which samples were checked, and their shape where they have one.
  EXPECT_EQ(failure_on_sample("bad", false, {5, 3, 2}),
            "layer 0 ('boom', Fails) rejected its input: bad; the input checked on its first 2 "
            "samples, [3,2] each");
  EXPECT_EQ(failure_on_sample("bad", false, {1, 4}),
            "layer 0 ('boom', Fails) rejected its input: bad; the input checked on its 1 sample, "
            "[4] each");
  EXPECT_EQ(failure_on_sample("bad", false, {7}),
            "layer 0 ('boom', Fails) rejected its input: bad; the input checked on its first 2 "
            "samples");
}

}  // namespace
}  // namespace pipebal::models
