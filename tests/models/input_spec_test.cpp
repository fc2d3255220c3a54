// `--input` specs: parsing every dtype and form, refusing malformed ones with the reason, and the
// tensors they make (dtype, shape, value range) and the synthetic batches built from them.
#include "pipebal/models/input_spec.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/models/synthetic.h"

namespace pipebal::models {
namespace {

void expect_refused(const std::string& text, const std::string& fragment) {
  try {
    parse_input_spec(text);
    FAIL() << text << " was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(InputSpec, ParsesEveryDtypeAndReadsBack) {
  for (const std::string text : {"float32[32,3,64,64]", "float64[4,8]", "float16[2,2]",
                                 "bfloat16[2,2]", "int64[32,64]:1000", "int32[8]:7", "bool[4,5]"}) {
    EXPECT_EQ(to_string(parse_input_spec(text)), text);
  }
  const InputSpec tokens = parse_input_spec("int64[32,64]:1000");
  EXPECT_EQ(tokens.dtype, c10::kLong);
  EXPECT_EQ(tokens.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(tokens.high, 1000);
  EXPECT_EQ(to_string(parse_input_spec("float[2,3]")), "float32[2,3]");  // synonyms read
}

TEST(InputSpec, RefusesMalformedSpecsWithTheReason) {
  expect_refused("float32", "expected DTYPE[SHAPE] or DTYPE[SHAPE]:HIGH");
  expect_refused("float32[8,4", "expected DTYPE[SHAPE]");
  expect_refused("complex[8]", "unknown dtype 'complex' (valid: float32, float64");
  expect_refused("float32[8,x]", "expected positive integers");
  expect_refused("float32[0,4]", "expected positive integers");
  expect_refused("int64[8,4]", "an integer input needs its range");
  expect_refused("int64[8,4]:0", "an integer input needs its range");
  expect_refused("float32[8,4]:3", "only integer inputs take a range");
  try {
    parse_input_specs({"float32[8,4]", "float32[4,4]"});
    FAIL() << "batch sizes differ";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("must agree"), std::string::npos) << error.what();
  }
}

TEST(InputSpec, MakesTensorsOfItsTypeShapeAndRange) {
  torch::manual_seed(0);
  const at::Tensor tokens = make_input(parse_input_spec("int64[64,32]:5"));
  EXPECT_EQ(tokens.scalar_type(), c10::kLong);
  EXPECT_EQ(tokens.sizes().vec(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(tokens.min().item<int64_t>(), 0);
  EXPECT_EQ(tokens.max().item<int64_t>(), 4);  // every value in [0, 5) drawn among 2048
  const at::Tensor flags = make_input(parse_input_spec("bool[64,32]"));
  EXPECT_EQ(flags.scalar_type(), c10::kBool);
  EXPECT_GT(flags.sum().item<int64_t>(), 0);
  EXPECT_LT(flags.sum().item<int64_t>(), 64 * 32);
  const at::Tensor values = make_input(parse_input_spec("float64[64,32]"));
  EXPECT_EQ(values.scalar_type(), c10::kDouble);
  EXPECT_LT(values.mean().abs().item<double>(), 0.2);  // normal(0, 1)
  const auto halved = with_batch_size(parse_input_specs({"float32[8,4]", "int64[8]:3"}), 2);
  EXPECT_EQ(to_strings(halved), (std::vector<std::string>{"float32[2,4]", "int64[2]:3"}));
}

TEST(InputSpec, AModelsDefaultInputIsWhatInputShapeMeant) {
  const Model gpt = build_model("gpt:layers=1,dim=16,heads=2,seq=8,vocab=40", 0);
  EXPECT_EQ(to_strings(model_inputs(gpt, {}, {4, 8})), std::vector<std::string>{"int64[4,8]:40"});
  // The same synthetic batch either way.
  const SyntheticData by_shape = make_synthetic_data(gpt, std::vector<int64_t>{4, 8}, 3);
  const SyntheticData by_spec = make_synthetic_data(gpt, parse_input_specs({"int64[4,8]:40"}), 3);
  EXPECT_TRUE(torch::equal(by_shape.input.value(), by_spec.input.value()));
  EXPECT_TRUE(torch::equal(by_shape.target, by_spec.target));
  const Model mlp = build_model("mlp:layers=1,width=8", 0);
  EXPECT_THROW(model_inputs(mlp, {"float32[4,8]"}, {4, 8}), std::invalid_argument);
  EXPECT_EQ(model_inputs(mlp, {}, {})[0].shape, mlp.info.default_input_shape);
}

}  // namespace
}  // namespace pipebal::models
