// The `--input` specs a profile or plan carries ("float32[32,3,64,64]", "int64[32,64]:1000"),
// read without LibTorch: their form and the shape each gives, so that `balance` and `plan`
// refuse the specs `train` would, naming the field, instead of passing them on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/common/json_reader.h"

namespace pipebal::balance {

// The shape `spec` gives (batch first), or nullopt when it is not DTYPE[D,...] or
// DTYPE[D,...]:HIGH with a dtype `--input` takes and positive dimensions.
std::optional<std::vector<int64_t>> input_spec_shape(const std::string& spec);

// `inputs`, read from `field`, against their form, each other (one batch size) and `input_shape`
// (the first input's shape, when the document gives it); throws `field`'s one-line error.
void check_input_specs(const JsonReader& field, const std::vector<std::string>& inputs,
                       const std::vector<int64_t>& input_shape);

}  // namespace pipebal::balance
