// See dtype.h.
#include "pipebal/pipeline/dtype.h"

#include <utility>

namespace pipebal::pipeline {
namespace {

// Canonical names first: dtype_name() returns the first name of a type.
const std::pair<const char*, c10::ScalarType> kNames[] = {
    {"float32", c10::kFloat},     {"float64", c10::kDouble}, {"float16", c10::kHalf},
    {"bfloat16", c10::kBFloat16}, {"int64", c10::kLong},     {"int32", c10::kInt},
    {"bool", c10::kBool},         {"float", c10::kFloat},    {"double", c10::kDouble},
    {"half", c10::kHalf},         {"long", c10::kLong},      {"int", c10::kInt},
};

// Types pipebal does not take (--dtype, --input) but may meet in a user's data: named as PyTorch
// names them, not as LibTorch's ScalarType does ("ComplexFloat", "Char").
const std::pair<const char*, c10::ScalarType> kOtherNames[] = {
    {"complex64", c10::kComplexFloat},
    {"complex128", c10::kComplexDouble},
    {"complex32", c10::kComplexHalf},
    {"uint8", c10::kByte},
    {"int8", c10::kChar},
    {"int16", c10::kShort},
};

}  // namespace

std::optional<c10::ScalarType> dtype_named(const std::string& name) {
  for (const auto& [text, dtype] : kNames) {
    if (name == text) return dtype;
  }
  return std::nullopt;
}

std::string dtype_name(c10::ScalarType dtype) {
  for (const auto& [text, type] : kNames) {
    if (type == dtype) return text;
  }
  for (const auto& [text, type] : kOtherNames) {
    if (type == dtype) return text;
  }
  return c10::toString(dtype);
}

const char* dtype_names() {
  return "float32, float64, float16, bfloat16, int64, int32 or bool";
}

}  // namespace pipebal::pipeline
