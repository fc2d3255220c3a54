// What every fuzz target shares: input bytes as JSON, and the rule that a reader may refuse an
// input with an exception (the CLI prints its one line) but never crash, hang or trip a
// sanitizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace pipebal::fuzz {

inline std::optional<nlohmann::json> parse(const uint8_t* data, size_t size) {
  nlohmann::json doc =
      nlohmann::json::parse(data, data + size, /*callback=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return std::nullopt;
  return doc;
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
