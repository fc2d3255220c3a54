// See schema.h.
#include "common/schema.h"

#include <stdexcept>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace pipebal {

std::string schema_tag(const std::string& name, int major) {
  return name + "/" + std::to_string(major);
}

namespace {

using json = nlohmann::json;

// Builds the document as nlohmann's own SAX parser does (iterative, so a deep document costs no
// stack) and checks it on the way: nesting past kMaxJsonDepth is refused before anything walks
// it recursively, and so is a key given twice in one object, of which the document would keep
// only the last (a hand edit that adds "balance" again must not be silently half-ignored). The
// parser's callback could do both, but made parsing quadratic in the document's length (a
// profile of 65536 layers took 2.5 s instead of 0.09).
class CheckedDocumentBuilder {
 public:
  CheckedDocumentBuilder(json& document, const std::string& what)
      : builder_(document), what_(what) {}

  bool null() { return value(builder_.null()); }
  bool boolean(bool b) { return value(builder_.boolean(b)); }
  bool number_integer(json::number_integer_t n) { return value(builder_.number_integer(n)); }
  bool number_unsigned(json::number_unsigned_t n) { return value(builder_.number_unsigned(n)); }
  bool number_float(json::number_float_t x, const json::string_t& text) {
    return value(builder_.number_float(x, text));
  }
  bool string(json::string_t& s) { return value(builder_.string(s)); }
  bool binary(json::binary_t& b) { return value(builder_.binary(b)); }

  bool start_object(std::size_t size) { return open(true) && builder_.start_object(size); }
  bool start_array(std::size_t size) { return open(false) && builder_.start_array(size); }
  bool end_object() { return close(builder_.end_object()); }
  bool end_array() { return close(builder_.end_array()); }

  bool key(json::string_t& key) {
    Level& level = levels_[depth_ - 1];
    if (!level.keys.insert(key).second) {
      throw std::invalid_argument(fmt::format("{}: \"{}\" given twice in {}", what_, key,
                                              depth_ == 1 ? "the document" : path(depth_ - 1)));
    }
    level.key = key;
    return builder_.key(key);
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    throw std::invalid_argument(what_ + ": malformed JSON at byte " + std::to_string(position));
  }

 private:
  // One open object or array. Kept when closed, so that the next one at this depth reuses it.
  struct Level {
    bool object = false;
    std::unordered_set<std::string> keys;  // an object's keys so far
    std::string key;                       // an object's current key
    std::size_t index = 0;                 // an array's current element
  };

  // The path to the value inside levels_[0, levels), for messages: "layers[3].name".
  std::string path(std::size_t levels) const {
    std::string out;
    for (std::size_t i = 0; i < levels; ++i) {
      const Level& level = levels_[i];
      if (level.object) {
        out += out.empty() ? level.key : "." + level.key;
      } else {
        out += fmt::format("[{}]", level.index);
      }
    }
    return out;
  }

  // A value ended: an array moves on to its next element.
  bool value(bool built) {
    if (depth_ > 0 && !levels_[depth_ - 1].object) ++levels_[depth_ - 1].index;
    return built;
  }

  bool open(bool object) {
    if (depth_ >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw std::invalid_argument(what_ + ": JSON nested deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels");
    }
    if (depth_ == levels_.size()) levels_.emplace_back();
    Level& level = levels_[depth_++];
    level.object = object;
    level.keys.clear();
    level.index = 0;
    return true;
  }

  bool close(bool built) {
    --depth_;
    return value(built);
  }

  nlohmann::detail::json_sax_dom_parser<json> builder_;
  const std::string& what_;
  std::vector<Level> levels_;
  std::size_t depth_ = 0;
};

}  // namespace

json parse_json(const std::string& text, const std::string& what) {
  json document;
  CheckedDocumentBuilder builder(document, what);
  json::sax_parse(text, &builder);
  return document;
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
