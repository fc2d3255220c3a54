// Tensor element types by the names users type (`--dtype`, `--input 'int64[32,64]:1000'`) and
// back: float32, float64, float16, bfloat16, int64, int32, bool.
#pragma once

#include <optional>
#include <string>

#include <c10/core/ScalarType.h>

namespace pipebal::pipeline {

// The type `name` stands for ("float" and "double", "half", "long" and "int" are accepted as
// synonyms); nullopt for anything else.
std::optional<c10::ScalarType> dtype_named(const std::string& name);

// "float32", "int64", ...: the name dtype_named() reads back; a type it does not read is named
// as PyTorch names it ("complex64", "uint8").
std::string dtype_name(c10::ScalarType dtype);

// The names dtype_named() reads, for error messages: "float32, float64, ...".
const char* dtype_names();

}  // namespace pipebal::pipeline
