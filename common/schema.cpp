// See schema.h.
#include "common/schema.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace pipebal {

std::string schema_tag(const std::string& name, int major) {
  return name + "/" + std::to_string(major);
}

namespace {

// The deepest nesting of arrays and objects in `text`, outside strings. A scan of its own: the
// parser's callback, which could count it too, made parsing quadratic in the document's length
// (a profile of 65536 layers took 2.5 s to read instead of 0.09).
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  if (nesting_depth(text) > kMaxJsonDepth) {
    throw std::invalid_argument(what + ": JSON nested deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    return nlohmann::json::parse(text);
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
