// See schema.h.
#include "common/schema.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace pipebal {

std::string schema_tag(const std::string& name, int major) {
  return name + "/" + std::to_string(major);
}

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  const auto shallow = [&what](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) {
      throw std::invalid_argument(what + ": JSON nested deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, shallow);
  } catch (const nlohmann::json::parse_error& error) {
    throw std::invalid_argument(what + ": malformed JSON at byte " + std::to_string(error.byte));
  }
}

void check_schema(const nlohmann::json& doc, const std::string& name, int major, bool required) {
  if (!doc.is_object()) throw std::invalid_argument(name + ": expected a JSON object");
  const auto it = doc.find("schema");
  if (it == doc.end()) {
    if (required)
      throw std::invalid_argument("missing \"schema\" (expected " + schema_tag(name, major) + ")");
    return;
  }
  if (!it->is_string()) throw std::invalid_argument("\"schema\" must be a string");
  const std::string tag = it->get<std::string>();
  const auto slash = tag.rfind('/');
  const std::string found_name = tag.substr(0, slash);
  if (slash == std::string::npos || found_name != name) {
    throw std::invalid_argument("unexpected schema \"" + tag + "\" (expected " +
                                schema_tag(name, major) + ")");
  }
  int found_major = -1;
  try {
    found_major = std::stoi(tag.substr(slash + 1));
  } catch (const std::exception&) {
  }
  if (found_major != major) {
    throw std::invalid_argument("unsupported schema version \"" + tag + "\" (this pipebal reads " +
                                schema_tag(name, major) + ")");
  }
}

}  // namespace pipebal
