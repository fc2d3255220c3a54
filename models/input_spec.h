// One forward argument of a synthetic batch, as `--input` gives it: DTYPE[SHAPE], batch dimension
// first, and for integer inputs the range of values:
//   float32[32,3,64,64]    normal(0, 1) values
//   int64[32,64]:1000      token ids in [0, 1000)
//   bool[32,64]            a fair coin per element
// dtypes: float32, float64, float16, bfloat16, int64, int32, bool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace pipebal::models {

struct InputSpec {
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> shape;  // batch dimension first
  int64_t high = 0;            // integer inputs: values in [0, high); 0 otherwise
};

// Parses one spec; throws std::invalid_argument "<what> '<text>': ..." saying what is wrong
// (unknown dtype, malformed or non-positive shape, a range on a non-integer input, an integer
// input without one). `what` names where the text came from: an option, or a plan's field.
InputSpec parse_input_spec(const std::string& text, const std::string& what = "--input");
// The text parse_input_spec() reads back: "int64[32,64]:1000".
std::string to_string(const InputSpec& spec);

// Every spec parsed; they must agree on the batch size (dim 0).
std::vector<InputSpec> parse_input_specs(const std::vector<std::string>& texts);
std::vector<std::string> to_strings(const std::vector<InputSpec>& specs);

// The same inputs with `batch` samples (dim 0).
std::vector<InputSpec> with_batch_size(std::vector<InputSpec> specs, int64_t batch);
// `specs` with every floating-point input in `dtype` (what `--dtype` converts the model to).
std::vector<InputSpec> with_float_dtype(std::vector<InputSpec> specs, c10::ScalarType dtype);

// A tensor of the spec drawn from LibTorch's default generator (seed it first).
at::Tensor make_input(const InputSpec& spec);

}  // namespace pipebal::models
