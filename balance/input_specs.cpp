// See input_specs.h.
#include "pipebal/balance/input_specs.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/parse_integers.h"

namespace pipebal::balance {
namespace {

// What `--input` takes (pipeline/dtype.h, which needs LibTorch, reads the same names).
constexpr const char* kDtypes[] = {"float32", "float64", "float16", "bfloat16", "int64", "int32",
                                   "bool",    "float",   "double",  "half",     "long",  "int"};
constexpr const char* kDtypeNames = "float32, float64, float16, bfloat16, int64, int32 or bool";
constexpr int64_t kMaxDimension = (int64_t{1} << 31) - 1;  // as models/synthetic.h's shapes

// What is wrong with `spec`, or empty when it is a spec, its shape then in `shape`.
std::string spec_error(const std::string& spec, std::vector<int64_t>& shape) {
  const size_t open = spec.find('[');
  const size_t close = spec.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return "expected DTYPE[SHAPE] or DTYPE[SHAPE]:HIGH, e.g. float32[32,3,64,64] or "
           "int64[32,64]:1000";
  }
  const std::string dtype = spec.substr(0, open);
  if (std::none_of(std::begin(kDtypes), std::end(kDtypes),
                   [&](const char* name) { return dtype == name; })) {
    return fmt::format("unknown dtype '{}' (valid: {})", dtype, kDtypeNames);
  }
  const std::optional<std::vector<int64_t>> dims =
      parse_integer_list(spec.substr(open + 1, close - open - 1));
  if (!dims || std::any_of(dims->begin(), dims->end(),
                           [](int64_t d) { return d < 1 || d > kMaxDimension; })) {
    return fmt::format("its shape is not integers from 1 to {} separated by commas", kMaxDimension);
  }
  // As models/input_spec.h: integers are drawn below :HIGH, which they need; others take none.
  const std::string rest = spec.substr(close + 1);
  const bool integer = dtype == "int64" || dtype == "int32" || dtype == "long" || dtype == "int";
  if (integer) {
    const std::optional<int64_t> high =
        rest.size() > 1 && rest[0] == ':' ? parse_integer(rest.substr(1)) : std::nullopt;
    if (!high || *high < 1) return "an integer input needs its range, ':HIGH' with HIGH >= 1";
  } else if (!rest.empty()) {
    return "only integer inputs take a range (':HIGH')";
  }
  shape = *dims;
  return "";
}

}  // namespace

std::optional<std::vector<int64_t>> input_spec_shape(const std::string& spec) {
  std::vector<int64_t> shape;
  if (!spec_error(spec, shape).empty()) return std::nullopt;
  return shape;
}

void check_input_specs(const JsonReader& field, const std::vector<std::string>& inputs,
                       const std::vector<int64_t>& input_shape) {
  const std::vector<JsonReader> items = field.elements();
  std::vector<int64_t> first;
  for (size_t i = 0; i < inputs.size() && i < items.size(); ++i) {
    std::vector<int64_t> shape;
    const std::string error = spec_error(inputs[i], shape);
    if (!error.empty()) items[i].fail(fmt::format("'{}': {}", inputs[i], error));
    if (i == 0) first = shape;
    if (shape.front() != first.front()) {
      items[i].fail(
          fmt::format("'{}' has {} samples, the first input '{}' {}: every input has "
                      "the mini-batch's",
                      inputs[i], shape.front(), inputs[0], first.front()));
    }
  }
  if (!first.empty() && !input_shape.empty() && first != input_shape) {
    items[0].fail(fmt::format("'{}' is not input_shape [{}], which gives the same input's shape",
                              inputs[0], fmt::join(input_shape, ",")));
  }
}

}  // namespace pipebal::balance
