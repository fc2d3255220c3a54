// See input_spec.h.
#include "pipebal/models/input_spec.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "pipebal/common/cgroups.h"
#include "pipebal/common/format_bytes.h"
#include "pipebal/common/parse_integers.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/pipeline/dtype.h"

namespace pipebal::models {
namespace {

bool is_integer(c10::ScalarType dtype) {
  return c10::isIntegralType(dtype, /*includeBool=*/false);
}

}  // namespace

InputSpec parse_input_spec(const std::string& text, const std::string& what) {
  const auto open = text.find('[');
  const auto close = text.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    throw std::invalid_argument(fmt::format(
        "{} '{}': expected DTYPE[SHAPE] or DTYPE[SHAPE]:HIGH, e.g. float32[32,3,64,64] or "
        "int64[32,64]:1000",
        what, text));
  }
  InputSpec spec;
  const std::string dtype = text.substr(0, open);
  const auto parsed = pipeline::dtype_named(dtype);
  if (!parsed) {
    throw std::invalid_argument(fmt::format("{} '{}': unknown dtype '{}' (valid: {})", what, text,
                                            dtype, pipeline::dtype_names()));
  }
  spec.dtype = *parsed;
  try {
    spec.shape = parse_shape(text.substr(open + 1, close - open - 1));
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(fmt::format("{} '{}': {}", what, text, error.what()));
  }
  const std::string rest = text.substr(close + 1);
  if (is_integer(spec.dtype)) {
    const auto high = rest.size() > 1 && rest[0] == ':' ? parse_integer(rest.substr(1))
                                                        : std::optional<int64_t>();
    if (!high || *high < 1) {
      throw std::invalid_argument(fmt::format(
          "{} '{}': an integer input needs its range, a positive integer after ':', e.g. "
          "{}[{}]:1000 for values in [0, 1000)",
          what, text, dtype, fmt::join(spec.shape, ",")));
    }
    spec.high = *high;
  } else if (!rest.empty()) {
    throw std::invalid_argument(fmt::format(
        "{} '{}': only integer inputs take a range (':HIGH'); {} values are drawn from {}", what,
        text, dtype, spec.dtype == c10::kBool ? "a fair coin" : "normal(0, 1)"));
  }
  return spec;
}

std::string to_string(const InputSpec& spec) {
  std::string text =
      fmt::format("{}[{}]", pipeline::dtype_name(spec.dtype), fmt::join(spec.shape, ","));
  if (spec.high > 0) text += fmt::format(":{}", spec.high);
  return text;
}

std::vector<InputSpec> parse_input_specs(const std::vector<std::string>& texts) {
  std::vector<InputSpec> specs;
  for (const std::string& text : texts) {
    specs.push_back(parse_input_spec(text));
    if (specs.back().shape[0] != specs.front().shape[0]) {
      throw std::invalid_argument(
          fmt::format("--input '{}' has {} samples, --input '{}' {}: every input is scattered "
                      "into micro-batches along dim 0, so they must agree",
                      texts.front(), specs.front().shape[0], text, specs.back().shape[0]));
    }
  }
  return specs;
}

std::vector<std::string> to_strings(const std::vector<InputSpec>& specs) {
  std::vector<std::string> texts;
  for (const InputSpec& spec : specs) texts.push_back(to_string(spec));
  return texts;
}

std::vector<InputSpec> with_batch_size(std::vector<InputSpec> specs, int64_t batch) {
  for (InputSpec& spec : specs) spec.shape[0] = batch;
  return specs;
}

std::vector<InputSpec> with_float_dtype(std::vector<InputSpec> specs, c10::ScalarType dtype) {
  for (InputSpec& spec : specs) {
    if (c10::isFloatingType(spec.dtype)) spec.dtype = dtype;
  }
  return specs;
}

at::Tensor make_input(const InputSpec& spec) {
  // One larger than the memory this process may use would be filled page by page until the
  // kernel killed the process (the allocation itself succeeds, memory being overcommitted; a
  // container's limit kills it as surely as the machine's size).
  double bytes = static_cast<double>(c10::elementSize(spec.dtype));
  for (const int64_t d : spec.shape) bytes *= static_cast<double>(d);
  const double memory = usable_memory_bytes();
  if (memory > 0 && bytes > memory) {
    throw std::invalid_argument(fmt::format("input {} needs {}, more than {}", to_string(spec),
                                            format_bytes(bytes), usable_memory_text()));
  }
  const auto options = torch::TensorOptions().dtype(spec.dtype);
  if (spec.dtype == c10::kBool) return torch::randint(2, spec.shape, options);
  if (is_integer(spec.dtype)) return torch::randint(spec.high, spec.shape, options);
  return torch::randn(spec.shape, options);
}

}  // namespace pipebal::models
