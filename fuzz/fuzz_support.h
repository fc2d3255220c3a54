// What every fuzz target shares: input bytes as JSON, and the rule that a reader may refuse an
// input with an exception (the CLI prints its one line) but never crash, hang or trip a
// sanitizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "pipebal/common/schema.h"

namespace pipebal::fuzz {

// Through parse_json, as every pipebal command reads a document; refused: nothing to read.
inline std::optional<nlohmann::json> parse(const uint8_t* data, size_t size) {
  try {
    return parse_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// Runs `read`; a refusal by exception is a correct answer to bad input.
template <typename Read>
void refusing_is_fine(Read&& read) {
  try {
    read();
  } catch (const std::exception&) {
  }
}

}  // namespace pipebal::fuzz
