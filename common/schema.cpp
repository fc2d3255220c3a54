// See schema.h.
#include "pipebal/common/schema.h"

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

// A key or path as text fit for one line of a message: escaped as JSON escapes it.
std::string printable(const std::string& key) {
  const std::string quoted = json(key).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// Builds the document from nlohmann's SAX parser (iterative, so a deep document costs no stack)
// and checks it on the way: nesting past kMaxJsonDepth is refused before anything walks it
// recursively, and so is a key given twice in one object, of which the document would keep only
// the last (a hand edit that adds "balance" again must not be silently half-ignored). The
// parser's callback could do both, but made parsing quadratic in the document's length (a
// profile of 65536 layers took 2.5 s instead of 0.09).
class CheckedDocumentBuilder {
 public:
  CheckedDocumentBuilder(json& document, const std::string& what)
      : document_(document), what_(what) {}

  bool null() { return place(nullptr); }
  bool boolean(bool b) { return place(b); }
  bool number_integer(json::number_integer_t n) { return place(n); }
  bool number_unsigned(json::number_unsigned_t n) { return place(n); }
  bool number_float(json::number_float_t x, const json::string_t&) { return place(x); }
  bool string(json::string_t& s) { return place(std::move(s)); }
  bool binary(json::binary_t& b) { return place(json::binary(std::move(b))); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& key) {
    Level& level = levels_[depth_ - 1];
    if (!level.keys.insert(key).second) {
      throw std::invalid_argument(fmt::format("{}: \"{}\" given twice in {}", what_, printable(key),
                                              depth_ == 1 ? "the document" : path(depth_ - 1)));
    }
    level.key = key;
    member_ = &(*level.value)[key];
    return true;
  }

  bool parse_error(std::size_t position, const std::string& token, const json::exception& error) {
    // An overflowing number is an out_of_range error: say so, where a syntax error needs no more.
    const std::string why =
        error.id == 406 ? fmt::format(" (a number out of range: {})", printable(token)) : "";
    throw std::invalid_argument(
        fmt::format("{}: malformed JSON at byte {}{}", what_, position, why));
  }

 private:
  // One open object or array. Kept when closed, so that the next one at this depth reuses it.
  struct Level {
    json* value = nullptr;                 // in the document
    std::unordered_set<std::string> keys;  // an object's keys so far
    std::string key;                       // an object's current key
  };

  // The path to the value inside levels_[0, levels), for messages: "layers[3].name".
  std::string path(std::size_t levels) const {
    std::string out;
    for (std::size_t i = 0; i < levels; ++i) {
      const Level& level = levels_[i];
      if (level.value->is_object()) {
        out += (out.empty() ? "" : ".") + printable(level.key);
      } else {
        out += fmt::format("[{}]", level.value->size() - 1);  // the element open now
      }
    }
    return out;
  }

  // Puts a value where the document is at: the root, an object's current member or an array's
  // next element. Open containers are never moved: only the innermost one grows.
  json* put(json&& value) {
    if (depth_ == 0) {
      document_ = std::move(value);
      return &document_;
    }
    Level& level = levels_[depth_ - 1];
    if (level.value->is_object()) {
      *member_ = std::move(value);
      return member_;
    }
    level.value->push_back(std::move(value));
    return &level.value->back();
  }

  bool place(json value) {
    put(std::move(value));
    return true;
  }

  bool open(json container) {
    if (depth_ >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw std::invalid_argument(what_ + ": JSON nested deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels");
    }
    json* value = put(std::move(container));
    if (depth_ == levels_.size()) levels_.emplace_back();
    Level& level = levels_[depth_++];
    level.value = value;
    // A set that held many keys would take as long to clear as to make anew, at every object.
    if (level.keys.bucket_count() > 64) {
      level.keys = {};
    } else {
      level.keys.clear();
    }
    return true;
  }

  bool close() {
    --depth_;
    return true;
  }

  json& document_;
  const std::string& what_;
  json* member_ = nullptr;  // the current object's member named by its current key
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
